// Saving a template does the work each send of it will do, within the same time and heap
// limits, so a template no send could render is refused at save (400 naming it), not saved and
// then refused at every send (each stopping the shared rendering thread): handlebars generates
// its code at save (it otherwise waits for the first rendering), and the html is sanitized, every
// value empty, on its deepest rendering and with every {{#if}}/{{#unless}} branch taken. Elements
// nested more than 50,000 deep on that rendering are refused at once rather than sanitized for
// the whole time limit (200,000 unclosed <b> took ~10 s).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MAX_HTML_DEPTH } from '../infra/rendering/sanitize.ts';
import { TemplateThreads } from '../infra/rendering/template-threads.ts';
import { errorCode } from './support/management.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template save does the work of a send');

test.before(async (ctx) => {
  ctx.w = await populateTemplateWorld(await startAppIn('embedded'));
});
test.after(async (ctx) => {
  await ctx.w.t.close();
});

const save = (w: TemplateWorld, slug: string, body: { html?: string; text?: string }) =>
  templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: slug, slug, subject: 'Hi', ...body } });
const send = (w: TemplateWorld, slug: string, variables: Record<string, unknown>) =>
  sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: slug, variables });

function expectError(response: { statusCode: number; body: string; json(): any }, status: number, code: string, message: RegExp): void {
  // A template saved by mistake comes back whole: its first few hundred characters tell enough.
  assert.is(response.statusCode, status, response.body.slice(0, 300));
  assert.is(errorCode(response as never), code);
  assert.match(response.json().error.message, message);
}

const tooDeep = /^body\.html: elements nest more than 50,000 deep on the deepest rendering \(each \{\{#if\}\} and \{\{#unless\}\} taking its deepest branch\); close them or flatten the html$/;

test(`600 KB of unclosed <b> (200,000 nested elements, ~10 s to sanitize) is refused at save for its depth; ${MAX_HTML_DEPTH.toLocaleString('en-US')} nested elements are saved`, async ({ w }) => {
  expectError(await save(w, 'nested', { html: `<p>{{v}}</p>${'<b>'.repeat(200_000)}` }), 400, 'validation_error', tooDeep);
  expectError(await save(w, 'one-too-deep', { html: `${'<div>'.repeat(MAX_HTML_DEPTH + 1)}{{v}}` }), 400, 'validation_error', tooDeep);
  await createTemplateAs(w, { slug: 'deepest', subject: 'Hi', html: `${'<b>'.repeat(MAX_HTML_DEPTH)}{{v}}` });
});

test('the depth counts every branch, as a send could take any; a preview whose html nests too deep is refused with 422, not 500', async ({ w }) => {
  expectError(await save(w, 'branchy', { html: `<p>{{v}}</p>{{#if v}}${'<b>'.repeat(MAX_HTML_DEPTH + 1)}{{/if}}` }), 400, 'validation_error', tooDeep);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi', html: `${'<b>'.repeat(MAX_HTML_DEPTH + 1)}{{v}}`, variables: { v: 'x' } } });
  expectError(previewed, 422, 'invalid_template_variables', /^body\.variables: in the rendered html elements nest more than 50,000 deep$/);
});

test('with threads of 128 MB heap and a 60 s limit (only memory deciding), 40,000 {{v}} is refused at save, where generating its code runs out of memory', async ({ w }) => {
  // At the defaults (1,024 MB, 2 s) the same happens with about 100,000 to 150,000 {{v}}.
  const original = w.t.ctx.services.templates;
  const small = new TemplateThreads({ timeLimitMs: 60_000, heapMb: 128 });
  w.t.ctx.services.templates = small;
  try {
    expectError(await save(w, 'wide', { text: '{{v}}'.repeat(40_000) }), 400, 'validation_error', /^body: compiling the template needed more memory than a template thread may use; make it smaller or simpler$/);
    await createTemplateAs(w, { slug: 'narrower', subject: 'Hi', text: '{{v}}'.repeat(4_000) });
    const sent = await send(w, 'narrower', { v: 'x' });
    assert.is(sent.statusCode, 202, `the replaced thread renders a template a tenth as wide: ${sent.body}`);
  } finally {
    w.t.ctx.services.templates = original;
    await small.close();
  }
});

test.run();
