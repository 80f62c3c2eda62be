// MJML templates saved before Relay checked MJML as written (mustaches MJML drops, MJML's
// validator, handlebars parsed on the source) keep sending as they did: a send compiles the
// stored revision without those refusals (infra/rendering/template-renderer.ts, 'stored'), with
// the variables found when it was saved, so no send of a template that worked starts failing.
// Only a save or a preview of the same content is refused. The documents are written straight
// into the store, as the earlier save wrote them.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openContent } from '../apps/services/content-vault.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import { newTemplateId } from '../apps/services/templates/template-ids.ts';
import { templatesOf } from '../apps/services/templates/templates.ts';
import type { AdmittedMessage } from '../domain/email/events.ts';
import { sendEmail, templates, templateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('MJML templates saved before the checks');

test.before(async (ctx) => {
  ctx.w = await templateWorld('embedded');
});
test.after(async (ctx) => {
  await ctx.w?.t.close();
});

const section = (text: string) => `<mj-section><mj-column><mj-text>${text}</mj-text></mj-column></mj-section>`;
const saved = {
  // {{#if vip}} between sections: MJML dropped it, so every recipient got the section.
  'vip-offer': { html: `<mjml>\n<mj-body>\n{{#if vip}}\n${section('VIP ONLY')}\n{{/if}}\n${section('Hello {{name}}')}\n</mj-body>\n</mjml>`, variables: ['name'] },
  // An element MJML does not know: dropped with its content.
  misspelt: { html: `<mjml><mj-body><mj-sectoin>${section('lost')}</mj-sectoin>${section('Hello {{name}}')}</mj-body></mjml>`, variables: ['name'] },
  // Not a template on its own (the {{#if}} is never closed), but MJML dropped the {{#if}}.
  unclosed: { html: `<mjml><mj-body><mj-section><mj-column>{{#if vip}}<mj-text>Hello {{name}}</mj-text></mj-column></mj-section></mj-body></mjml>`, variables: ['name'] },
};

async function store(w: TemplateWorld, slug: string, content: { html: string; variables: string[] }): Promise<string> {
  const at = w.t.ctx.now();
  const id = newTemplateId(at);
  await templatesOf(w.t.ctx.documents).insert({
    _id: id, projectId: w.projectId, name: slug, slug, subject: 'Hi {{name}}', html: content.html, text: null,
    revision: 1, variables: content.variables, createdAt: at.toISOString(), updatedAt: at.toISOString(),
  });
  return id;
}

async function sentHtml(w: TemplateWorld, slug: string): Promise<string> {
  w.t.clock.advance(61_000);
  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: slug, variables: { name: 'Ann' } });
  assert.is(sent.statusCode, 202, `${slug}: ${sent.body}`);
  const [accepted] = await readEmailStream(w.t.ctx.events, sent.json().id);
  const content = await openContent(w.t.ctx.documents, w.t.ctx.services.secrets, (accepted.data as AdmittedMessage).content, w.t.ctx.now());
  return content!.html!;
}

test('each is sent as before, with the variables it was saved with', async ({ w }) => {
  for (const [slug, content] of Object.entries(saved)) {
    await store(w, slug, content);
    const html = await sentHtml(w, slug);
    assert.ok(html.startsWith('<!doctype html>'), slug);
    assert.match(html, /Hello Ann/, slug);
  }
  assert.match(await sentHtml(w, 'vip-offer'), /VIP ONLY/, 'the section MJML kept is sent, as it was');
  assert.not.match(await sentHtml(w, 'misspelt'), /lost/);
});

test('a save or a preview of the same content is refused, and the stored revision still sends', async ({ w }) => {
  const id = (await templates(w.t, 'GET', '/v1/templates', { as: w.owner, projectId: w.projectId })).json().templates.find((t: { slug: string }) => t.slug === 'vip-offer').id;
  const { html } = saved['vip-offer'];
  const edited = await templates(w.t, 'PATCH', `/v1/templates/${id}`, { as: w.owner, projectId: w.projectId, body: { name: 'vip-offer', slug: 'vip-offer', subject: 'Hi {{name}}', html, revision: 1 } });
  assert.is(edited.statusCode, 400, edited.body);
  assert.match(edited.json().error.message, /^body\.html: line 3, column 1: \{\{#if vip\}\} would be lost/);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 'Hi {{name}}', html, variables: { name: 'Ann', vip: false } } });
  assert.is(previewed.statusCode, 400, previewed.body);
  const stored = await templates(w.t, 'GET', `/v1/templates/${id}`, { as: w.owner, projectId: w.projectId });
  assert.is(stored.json().revision, 1);
  assert.equal(stored.json().variables, ['name']);
  assert.match(await sentHtml(w, 'vip-offer'), /Hello Ann/);
});

test.run();
