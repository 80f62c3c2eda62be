// The element depth a template's html is refused for at save is that of the deepest rendering a
// send can take: the branches of one {{#if}} or {{#unless}} ({{else}}, {{else if}}) are
// alternatives, never nested in each other, while blocks one after the other all count. html
// deep on each branch but within MAX_HTML_DEPTH on every path is saved and every send renders
// it; html over the limit on one path is refused with the spec's error envelope. Through the
// real HTTP API, with the admitted email's sealed html opened to see what was rendered.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { openContent } from '../apps/services/content-vault.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import type { AdmittedMessage } from '../domain/email/events.ts';
import { MAX_HTML_DEPTH } from '../infra/rendering/sanitize.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

const test = suite<{ w: TemplateWorld }>('template html depth: the deepest path, not every branch at once');

test.before(async (ctx) => {
  // Depth is what is tested here, not time: html 50,000 deep takes about a second to sanitize on
  // an idle machine, and a loaded CI machine must not turn that into the 2 s limit's refusal.
  ctx.w = await populateTemplateWorld(await startAppIn('embedded', { RELAY_TEMPLATE_TIME_LIMIT_MS: '20000' }));
});
test.after(async (ctx) => {
  await ctx.w.t.close();
});

/** More than half the limit: two such branches nested in each other would go over it. */
const DEEP = MAX_HTML_DEPTH / 2 + 500;
const open = (tag: string, n = DEEP) => `<${tag}>`.repeat(n);
const count = (html: string, tag: string) => html.split(`<${tag}>`).length - 1;

const save = (w: TemplateWorld, slug: string, html: string) =>
  templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: slug, slug, subject: 'Hi', html } });

/** Sends the template (a minute after the previous send: a development key admits 15 a minute) and returns the html rendered at admission. */
async function renderedBy(w: TemplateWorld, slug: string, variables: Record<string, unknown>): Promise<string> {
  w.t.clock.advance(61_000);
  const response = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: slug, variables });
  assert.is(response.statusCode, 202, response.body.slice(0, 300));
  const [accepted] = await readEmailStream(w.t.ctx.events, response.json().id);
  assert.is(accepted.type, 'EmailAccepted');
  const content = await openContent(w.t.ctx.documents, w.t.ctx.services.secrets, (accepted.data as AdmittedMessage).content, w.t.ctx.now());
  assert.ok(content?.html, 'the admitted email has html');
  return content!.html!;
}

/** The spec's envelope, exactly: {error: {code, message}}. */
function expectRefused(response: { statusCode: number; body: string; json(): any }): void {
  assert.is(response.statusCode, 400, response.body.slice(0, 300));
  const body = response.json();
  assert.equal(Object.keys(body), ['error']);
  assert.equal(Object.keys(body.error).sort(), ['code', 'message']);
  assert.is(body.error.code, 'validation_error');
  assert.match(body.error.message, /^body\.html: elements nest more than 50,000 deep on the deepest rendering \(each \{\{#if\}\} and \{\{#unless\}\} taking its deepest branch\); close them or flatten the html$/);
}

test(`{{#if}}…{{else}}… with ${DEEP.toLocaleString('en-US')} unclosed elements in each branch is saved, and a send on either branch renders it`, async ({ w }) => {
  const html = `<p>{{name}}</p>{{#if vip}}${open('div')}gold {{name}}{{else}}${open('span')}plain {{name}}{{/if}}`;
  const saved = await save(w, 'both-deep', html);
  assert.is(saved.statusCode, 201, saved.body.slice(0, 300));

  const gold = await renderedBy(w, 'both-deep', { name: 'Ann', vip: true });
  assert.is(count(gold, 'div'), DEEP);
  assert.is(count(gold, 'span'), 0);
  assert.match(gold, /gold Ann/);
  const plain = await renderedBy(w, 'both-deep', { name: 'Bob', vip: false });
  assert.is(count(plain, 'span'), DEEP);
  assert.is(count(plain, 'div'), 0);
  assert.match(plain, /plain Bob/);
});

test('an {{else if}} chain and an {{#unless}}…{{else}}: each branch an alternative, so each deep branch is saved on its own', async ({ w }) => {
  const chain = `{{#if a}}${open('div')}a{{else if b}}${open('span')}b{{else}}${open('b')}c{{/if}}`;
  const saved = await save(w, 'chain-deep', chain);
  assert.is(saved.statusCode, 201, saved.body.slice(0, 300));
  assert.is(count(await renderedBy(w, 'chain-deep', { a: false, b: true }), 'span'), DEEP);
  const unless = await save(w, 'unless-deep', `{{#unless a}}${open('i')}{{else}}${open('em')}{{a}}{{/unless}}`);
  assert.is(unless.statusCode, 201, unless.body.slice(0, 300));
});

test('over the limit on one path is refused with the error envelope and nothing stored: blocks one after the other add up, and a single deep branch counts', async ({ w }) => {
  const before = await w.t.ctx.documents.collection(COLLECTIONS.templates).count();
  // a true and b false: DEEP + DEEP elements, although neither block alone goes over.
  expectRefused(await save(w, 'two-blocks', `{{#if a}}${open('div')}{{else}}<p>x</p>{{/if}}{{#if b}}x{{else}}${open('span')}{{/if}}`));
  expectRefused(await save(w, 'one-branch', `{{#if a}}<p>{{a}}</p>{{else}}${open('div', MAX_HTML_DEPTH + 1)}{{/if}}`));
  assert.is(await w.t.ctx.documents.collection(COLLECTIONS.templates).count(), before);
  // The control: at the limit exactly on its deepest path, saved.
  await createTemplateAs(w, { slug: 'at-limit', subject: 'Hi', html: `{{#if a}}${open('div', MAX_HTML_DEPTH - DEEP)}{{else}}x{{/if}}${open('span')}` });
});

test.run();
