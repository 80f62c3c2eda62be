// Handlebars in an MJML template reaches the email or the template is refused. MJML keeps text
// only inside its content elements (mj-text, mj-button, mj-raw, …) and their attributes: a
// `{{#if vip}}…{{/if}}` written between sections, or a `{{name}}` written in an mj-column, would
// be dropped before handlebars ever saw it (the whole "VIP only" section sent to everyone, `vip`
// missing from the template's variables), and MJML's CSS inliner drops a declaration holding
// `{{brandColor}}` in an `<mj-style inline="inline">`. The save and the preview refuse such a
// template with a 400 naming body.html, the line and column of the mustache MJML would drop, and
// saying to put it inside an MJML content element or `<mj-raw>`; written in `<mj-raw>`, the
// condition holds, and the Template's `variables` names `vip`.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { errorCode } from './support/management.ts';
import { templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('MJML: handlebars between components');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const html = [
  '<mjml>',
  '  <mj-body>',
  '    {{#if vip}}',
  '    <mj-section><mj-column><mj-text>VIP ONLY: 50% off everything</mj-text></mj-column></mj-section>',
  '    {{/if}}',
  '    <mj-section><mj-column><mj-text>Hello {{name}}</mj-text></mj-column></mj-section>',
  '  </mj-body>',
  '</mjml>',
].join('\n');

const lost = (line: number, column: number, mustache: string) => new RegExp(
  `^body\\.html: line ${line}, column ${column}: ${mustache.replace(/[{}#]/g, '\\$&')} would be lost: .*put it inside an MJML content element or <mj-raw>$`,
);

test('a {{#if}} around an mj-section is refused at save and preview, at the line and column of the {{#if}}', async ({ w }) => {
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'offer', slug: 'vip-offer', subject: 'Hi {{name}}', html } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.is(errorCode(saved), 'validation_error');
  assert.match(saved.json().error.message, lost(3, 5, '{{#if vip}}'));

  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', {
    as: w.owner, projectId: w.projectId, body: { subject: 'Hi {{name}}', html, variables: { name: 'Ann', vip: false } },
  });
  assert.is(previewed.statusCode, 400, previewed.body);
  assert.match(previewed.json().error.message, lost(3, 5, '{{#if vip}}'));
  const listed = await templates(w.t, 'GET', '/v1/templates', { as: w.owner, projectId: w.projectId });
  assert.equal(listed.json().templates, [], 'nothing stored');
});

test('written in <mj-raw>, the same condition holds: the section is sent only when vip is true', async ({ w }) => {
  const raw = html.replace('{{#if vip}}', '<mj-raw>{{#if vip}}</mj-raw>').replace('{{/if}}', '<mj-raw>{{/if}}</mj-raw>');
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'offer', slug: 'vip-offer-raw', subject: 'Hi {{name}}', html: raw } });
  assert.is(saved.statusCode, 201, saved.body);
  assert.equal(saved.json().variables, ['name', 'vip']);
  for (const vip of [false, true]) {
    const previewed = await templates(w.t, 'POST', '/v1/templates/preview', {
      as: w.owner, projectId: w.projectId, body: { subject: 'Hi {{name}}', html: raw, variables: { name: 'Ann', vip } },
    });
    assert.is(previewed.statusCode, 200, previewed.body);
    assert.match(previewed.json().html, /Hello Ann/);
    assert.is(/VIP ONLY/.test(previewed.json().html), vip, `vip is ${vip}`);
  }
});

test('a {{name}} written in an mj-column, outside its mj-text, is refused at its line and column', async ({ w }) => {
  const source = '<mjml><mj-body><mj-section><mj-column>{{name}}<mj-text>your order shipped</mj-text></mj-column></mj-section></mj-body></mjml>';
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'shipped', slug: 'shipped', subject: 'Shipped', html: source } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.match(saved.json().error.message, lost(1, 39, '{{name}}'));
});

test('a {{variable}} in an inlined mj-style rule is refused; in a style sheet that is not inlined, it is merged', async ({ w }) => {
  const body = '<mj-body><mj-section><mj-column><mj-text css-class="brand">Hi</mj-text></mj-column></mj-section></mj-body></mjml>';
  const inlined = `<mjml><mj-head><mj-style inline="inline">.brand { color: {{brandColor}}; }</mj-style></mj-head>${body}`;
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'brand', slug: 'brand', subject: 'Hi', html: inlined } });
  assert.is(saved.statusCode, 400, saved.body);
  assert.match(saved.json().error.message, lost(1, 58, '{{brandColor}}'));

  const sheet = `<mjml><mj-head><mj-style>.brand div { color: {{brandColor}} !important; }</mj-style></mj-head>${body}`;
  const kept = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'brand', slug: 'brand-sheet', subject: 'Hi', html: sheet } });
  assert.is(kept.statusCode, 201, kept.body);
  assert.equal(kept.json().variables, ['brandColor']);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', {
    as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html: sheet, variables: { brandColor: '#ff0000' } },
  });
  assert.is(previewed.statusCode, 200, previewed.body);
  assert.ok(previewed.json().html.includes('color: #ff0000'), 'the brand colour given is in the email');
});

test.run();
