// An MJML template may begin with handlebars comments (`{{!-- Welcome email, v2 --}}`, the
// comment syntax a template author is told to use, or `{{! … }}`): they render to nothing, so
// they are skipped like HTML comments when Relay decides whether html is MJML
// (infra/rendering/mjml.ts isMjmlDocument), and the template is compiled as MJML, a responsive
// document (<!doctype html>, the mj-button a link), at save, at preview and at every send, not
// taken for HTML whose <mjml>/<mj-*> tags the sanitizer strips down to the bare words.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openContent } from '../apps/services/content-vault.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import type { AdmittedMessage } from '../domain/email/events.ts';
import { sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('MJML after a handlebars comment');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const html = [
  '{{!-- Welcome email, v2: owned by the growth team --}}',
  '{{! reviewed by legal }}',
  '<mjml>',
  '  <mj-body>',
  '    <mj-section><mj-column>',
  '      <mj-text font-size="20px">Hi {{name}}</mj-text>',
  '      <mj-button href="https://acme.test/start">Get started</mj-button>',
  '    </mj-column></mj-section>',
  '  </mj-body>',
  '</mjml>',
].join('\n');

const isResponsiveDocument = (rendered: string) => {
  assert.ok(rendered.startsWith('<!doctype html>'), `compiled as MJML into a whole document, not: ${JSON.stringify(rendered.slice(0, 120))}`);
  assert.match(rendered, /<a [^>]*href="https:\/\/acme\.test\/start"/, 'the mj-button is a link');
  assert.match(rendered, /Hi Ann/);
};

test('a template whose MJML follows handlebars comments is saved, previewed and sent as MJML, not stripped to its words', async ({ w }) => {
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'welcome', slug: 'welcome', subject: 'Welcome', html } });
  assert.is(saved.statusCode, 201, saved.body);
  assert.equal(saved.json().variables, ['name']);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Welcome', html, variables: { name: 'Ann' } } });
  assert.is(previewed.statusCode, 200, previewed.body);
  isResponsiveDocument(previewed.json().html);

  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: 'welcome', variables: { name: 'Ann' } });
  assert.is(sent.statusCode, 202, sent.body);
  const [accepted] = await readEmailStream(w.t.ctx.events, sent.json().id);
  const content = await openContent(w.t.ctx.documents, w.t.ctx.services.secrets, (accepted.data as AdmittedMessage).content, w.t.ctx.now());
  isResponsiveDocument(content!.html!);
});

test.run();
