// A handlebars mistake in an MJML template is reported where the author wrote it: the
// handlebars of an MJML template is parsed and checked on the source as written, before MJML
// compiles it (infra/rendering/template-renderer.ts), so the 400 names body.html with the line
// and column of the author's source (apps/api/INTERFACE-DECISIONS.md, Templates: "a 400 naming
// the field, line and column"), not a line of the HTML MJML makes of it, which the author never
// sees: `{{user.name}}` on line 5 of a 9-line template is reported at line 5 (column 15, where
// its name starts), and an unclosed `{{#if}}` within the template's 9 lines.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('MJML: where a template error is');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const mjml = (line5: string) => ['<mjml>', '<mj-body>', '<mj-section>', '<mj-column>', line5, '</mj-column>', '</mj-section>', '</mj-body>', '</mjml>'].join('\n');

/** Every "line N" a message names. */
const linesNamed = (message: string) => [...message.matchAll(/line (\d+)/gi)].map((m) => Number(m[1]));

test('a construct that is not allowed is reported at its line in the MJML the author wrote', async ({ w }) => {
  const html = mjml('<mj-text>Hi {{user.name}}</mj-text>');
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'path', slug: 'path', subject: 'Hi', html } });
  assert.is(saved.statusCode, 400, saved.body);
  const message: string = saved.json().error.message;
  assert.match(message, /^body\.html: line 5, column 15: \{\{user\.name\}\}: variables are flat values/);
  assert.equal(linesNamed(message), [5], `the author's {{user.name}} is on line 5 of 9: ${message}`);
});

test('an unclosed {{#if}} is reported within the template the author wrote', async ({ w }) => {
  const html = mjml('<mj-text>Hi {{#if vip}}VIP</mj-text>');
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html, variables: { vip: true } } });
  assert.is(previewed.statusCode, 400, previewed.body);
  const message: string = previewed.json().error.message;
  assert.match(message, /^body\.html: template syntax: /);
  const lines = linesNamed(message);
  assert.ok(lines.length > 0 && lines.every((n) => n >= 1 && n <= 9), `the template has 9 lines: ${message}`);
});

test.run();
