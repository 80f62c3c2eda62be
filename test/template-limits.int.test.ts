// Templates cannot burn the event loop: nesting is limited (400 naming it, never a 500), every
// compile, preview and send rendering runs on a template thread within a time limit (refused
// with a clear error at save, preview and send), renderings are bounded in size, and previews
// are rate-limited per session. Two APIs share one data directory: A with the default limit,
// B with RELAY_TEMPLATE_TIME_LIMIT_MS at its 10 ms minimum.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { MAX_BLOCK_DEPTH } from '../domain/templates/syntax.ts';
import { PREVIEW_RATE } from '../domain/rate-limits.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { errorCode, signIn } from './support/management.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, templates, type TemplateWorld } from './support/templates.ts';

interface Context { w: TemplateWorld; fast: TestApp }

const test = suite<Context>('template limits');

test.before(async (ctx) => {
  const t = await startAppIn('embedded');
  ctx.w = await populateTemplateWorld(t);
  ctx.fast = await startTestApp({ RELAY_DASHBOARD_ORIGIN: t.config.dashboardOrigin, RELAY_TEMPLATE_TIME_LIMIT_MS: '10' }, { dataDir: t.config.dataDir });
});

test.after(async (ctx) => {
  await ctx.fast.close();
  await ctx.w.t.close();
});

let slugs = 0;
const slug = () => `limits-${++slugs}`;
const nested = (depth: number) => `${'{{#if a}}'.repeat(depth)}x${'{{/if}}'.repeat(depth)}`;
/** Hundreds of KB of MJML: its compilation takes far longer than 10 ms on any machine. */
const bigMjml = () => `<mjml><mj-body>${'<mj-section><mj-column><mj-text>Hello {{name}}, here is some news</mj-text><mj-button href="https://example.test/a">Read</mj-button></mj-column></mj-section>'.repeat(2000)}</mj-body></mjml>`;

function expectError(response: { statusCode: number; body: string; json(): any }, status: number, code: string, message: RegExp): void {
  assert.is(response.statusCode, status, response.body);
  assert.is(errorCode(response as never), code, response.body);
  assert.match(response.json().error.message, message);
}

test(`2,000 nested {{#if}} (handlebars' compiler overflows on them): 400 naming the ${MAX_BLOCK_DEPTH}-level limit at save and at preview, nothing stored`, async ({ w }) => {
  const before = await w.t.ctx.documents.collection(COLLECTIONS.templates).count();
  const saved = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'deep', slug: slug(), subject: 's', html: nested(2000) } });
  expectError(saved, 400, 'validation_error', /^body\.html: line 1, column \d+: blocks nest more than 32 deep/);
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 's', text: nested(2000), variables: { a: true } } });
  expectError(previewed, 400, 'validation_error', /^body\.text: line 1, column \d+: blocks nest more than 32 deep/);
  assert.is(await w.t.ctx.documents.collection(COLLECTIONS.templates).count(), before);
  const deepest = await templates(w.t, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'deepest', slug: slug(), subject: 's', html: nested(MAX_BLOCK_DEPTH) } });
  assert.is(deepest.statusCode, 201, deepest.body);
});

test('past the time limit a save and a preview are refused with 400 saying so, and the API goes on answering', async ({ w, fast }) => {
  const saved = await templates(fast, 'POST', '/v1/templates', { as: w.owner, projectId: w.projectId, body: { name: 'big', slug: slug(), subject: 's', html: bigMjml() } });
  expectError(saved, 400, 'validation_error', /^body: compiling the template took longer than 10 ms \(the limit\)/);
  const previewed = await templates(fast, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 's', html: bigMjml(), variables: { name: 'Ann' } } });
  expectError(previewed, 400, 'validation_error', /^body: rendering this preview took longer than 10 ms \(the limit\)/);
  assert.is((await fast.app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
});

test('past the time limit a template send is refused with 422 naming body.variables, and nothing is admitted', async ({ w, fast }) => {
  // Saved where the limit is the default; sent where it is 10 ms: merging 190 values of 10,000
  // characters and sanitizing the 1.9 MB of html takes far longer than that.
  const t = await createTemplateAs(w, { slug: slug(), subject: 'Heavy', html: '<p>{{v}}</p>'.repeat(190) });
  const body = { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: t.slug, variables: { v: 'x'.repeat(10_000) } };
  const eventCount = async () => (await w.t.stores.events.readAll({ maxCount: 100_000 })).length;
  const before = await eventCount();
  const sent = await sendEmail(fast, w.apiKey, body);
  expectError(sent, 422, 'invalid_template_variables', /^body\.variables: rendering the template with these variables took longer than 10 ms \(the limit\)/);
  assert.is((await sendEmail(fast, w.apiKey, { ...body, template: 'no-such-template' })).statusCode, 404, 'the API goes on answering');
  assert.is(await eventCount(), before, 'no email was admitted');
});

test('a rendering larger than 2,000,000 characters is refused before it is built: the 18 KB template whose entity-heavy values made 9 MB', async ({ w }) => {
  const html = '<p>{{a}}</p>'.repeat(1500);
  const variables = { a: '<&>"\''.repeat(240) };
  const previewed = await templates(w.t, 'POST', '/v1/templates/preview', { as: w.owner, projectId: w.projectId, body: { subject: 's', html, variables } });
  expectError(previewed, 422, 'invalid_template_variables', /^body\.variables\.a: the rendered html would exceed 2,000,000 characters/);
  const t = await createTemplateAs(w, { slug: slug(), subject: 's', html });
  const sent = await sendEmail(w.t, w.apiKey, { from: `app@${w.domain}`, to: `ann@${w.domain}`, template: t.slug, variables });
  expectError(sent, 422, 'invalid_template_variables', /^body\.variables\.a: the rendered html would exceed 2,000,000 characters/);
});

test(`previews are limited to ${PREVIEW_RATE.limit} per ${PREVIEW_RATE.windowMs / 1000} s per session: then 429 with Retry-After; another session is not held back`, async ({ w }) => {
  // Stopped at the start of a window, so that every preview below falls in the same one.
  w.t.clock.freeze(new Date(Math.ceil(Date.now() / PREVIEW_RATE.windowMs) * PREVIEW_RATE.windowMs + 1000));
  try {
    const session = await signIn(w.t, w.owner.email);
    const preview = (cookie: string) => templates(w.t, 'POST', '/v1/templates/preview', { as: cookie, projectId: w.projectId, body: { subject: 'Hi {{n}}', variables: { n: 1 } } });
    for (let i = 0; i < PREVIEW_RATE.limit; i++) assert.is((await preview(session)).statusCode, 200, `preview ${i + 1}`);
    const refused = await preview(session);
    expectError(refused, 429, 'rate_limit_exceeded', /^rate limit exceeded: retry in 9 seconds$/);
    assert.is(refused.headers['retry-after'], '9');
    assert.is((await preview(await signIn(w.t, w.owner.email))).statusCode, 200, 'a new session has its own count');
    w.t.clock.advance(PREVIEW_RATE.windowMs);
    assert.is((await preview(session)).statusCode, 200, 'the next window');
  } finally {
    w.t.clock.frozenAt = null;
  }
});

test.run();
