// A rendered html holds at most 2,000,000 characters, and MJML multiplies its source up to 50
// times (an <mj-divider/> of 13 characters in a column compiles to ~640 of table markup): a 78 KB
// MJML template, far within the 1,000,000 characters a template may hold, compiles to more html than
// any send could render, whatever its variables. Its save is refused with 400 naming the html as
// compiled from MJML; a tenth of it is saved and sent.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { errorCode } from './support/management.ts';
import { createTemplateAs, sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template MJML rendered size');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const dividers = (n: number) => `<mjml><mj-body><mj-section><mj-column>${'<mj-divider/>'.repeat(n)}</mj-column></mj-section></mj-body></mjml>`;

test('MJML whose compiled html alone exceeds 2,000,000 characters is refused at save, not refused at every send', async ({ w }) => {
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'rules', slug: 'rules', subject: 'Hi', html: dividers(6000) } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.is(errorCode(saved), 'validation_error');
  assert.match(saved.json().error.message, /^body\.html \(as compiled from MJML\): its text comes to [\d,]+ characters before any value \(every \{\{#if\}\} and \{\{#unless\}\} branch taken\), more than the 2,000,000 a rendered html may hold$/);
  assert.is((await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'rules' })).statusCode, 404, 'not stored');

  await createTemplateAs(w, { slug: 'fewer-rules', subject: 'Hi', html: dividers(600) });
  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'fewer-rules' });
  assert.is(sent.statusCode, 202, sent.body);
});

test.run();
