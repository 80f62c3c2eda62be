// Request bodies on every route (apps/api/body-parser.ts). Only the send route used to scan its
// bounds before JSON.parse: a request no route serves (404), one refused for want of a session,
// and every session route parsed up to 10 MiB with fastify's own parser, so `[[[[…` held the
// event loop for 1 to 3 s (JSON.parse recurses), no key or session needed. And bytes that are
// not UTF-8 became U+FFFD without a word: a Latin-1 "Café" subject was admitted 202 and stored as
// "Caf\uFFFD", also when the request declared charset=iso-8859-1.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { charsetOf } from '../apps/api/body-parser.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, type TemplateWorld } from './support/templates.ts';

const test = suite<{ t: TestApp; w: TemplateWorld }>('request bodies on every route');
test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { listen: true });
  ctx.w = await populateTemplateWorld(ctx.t);
});
test.after(async ({ t }) => t.close());

const MiB = 1024 * 1024;
/** Just under the 10 MiB limit. */
const deep = `${'['.repeat(5 * MiB - 16)}${']'.repeat(5 * MiB - 16)}`;
/** 3.3 million items: JSON.parse builds them all before anything counts them. */
const wide = `[${'1,'.repeat(3_300_000)}1]`;
const deepObject = (n: number) => `{"variables":${'{"a":'.repeat(n)}1${'}'.repeat(n)},"subject":"x"}`;

/** Longest stretch the event loop was held while the request was sent and answered. Well below the seconds JSON.parse took. */
const HELD_MS_AT_MOST = 150;

async function timed(t: TestApp, method: string, path: string, body: string | Buffer, headers: Record<string, string> = {}) {
  const h = monitorEventLoopDelay({ resolution: 5 });
  h.enable();
  const r = await fetch(t.url + path, { method, headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await r.text();
  h.disable();
  return { status: r.status, text, heldMs: Math.round(h.max / 1e6) };
}

const session = (w: TemplateWorld, as = w.owner) => ({ cookie: as.cookie });
const bearer = (w: TemplateWorld) => ({ authorization: `Bearer ${w.apiKey}` });

function assertRefused(r: { status: number; text: string }, status: number, code: string, message?: RegExp) {
  assert.is(r.status, status, r.text.slice(0, 300));
  const { error } = JSON.parse(r.text) as { error: { code: string; message: string } };
  assert.is(error.code, code);
  if (message) assert.match(error.message, message);
}

test('10 MiB of nesting, on routes no one may use and on every kind of route, never holds the event loop', async ({ t, w }) => {
  const cases: Array<[string, string, Record<string, string>, number, string]> = [
    ['POST', '/no-such-route', {}, 404, 'not_found'],
    ['PUT', '/v1/emails', {}, 404, 'not_found'],
    ['DELETE', '/v1/session', {}, 401, 'session_required'],
    ['DELETE', '/v1/session', session(w), 400, 'validation_error'],
    ['POST', `/v1/templates/preview?projectId=${w.projectId}`, session(w, w.viewer), 400, 'validation_error'],
    ['POST', '/v1/workspaces', session(w), 400, 'validation_error'],
    ['POST', `/v1/domains/nope/verify`, session(w), 400, 'validation_error'],
    ['POST', '/v1/emails', bearer(w), 400, 'validation_error'],
  ];
  for (const [method, path, headers, status, code] of cases) {
    const r = await timed(t, method, path, deep, headers);
    assertRefused(r, status, code);
    assert.ok(r.heldMs < HELD_MS_AT_MOST, `${method} ${path}: the event loop was held ${r.heldMs} ms`);
  }
});

test('a body past the bounds is 400 validation_error naming where, before JSON.parse builds it', async ({ t, w }) => {
  const preview = `/v1/templates/preview?projectId=${w.projectId}`;
  const r = await timed(t, 'POST', preview, wide, session(w, w.viewer));
  assertRefused(r, 400, 'validation_error', /^body: a request holds at most 1,000 keys and array items in all/);
  assert.ok(r.heldMs < HELD_MS_AT_MOST, `held ${r.heldMs} ms`);
  const nested = await timed(t, 'POST', preview, deepObject(50), session(w, w.viewer));
  assertRefused(nested, 400, 'validation_error', /^body\.variables(\.a){9}: a request nests at most 10 levels/);
});

test('the widest legitimate bodies still pass: large html, 100 variables, near misses keep their 422', async ({ t, w }) => {
  const preview = (body: unknown) => timed(t, 'POST', `/v1/templates/preview?projectId=${w.projectId}`, JSON.stringify(body), session(w, w.viewer));
  const variables = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`v${i}`, `value ${i}`]));
  const text = Object.keys(variables).map((name) => `{{${name}}}`).join(' ');
  const ok = await preview({ subject: 'Hi {{v0}}', html: `<p>${'x'.repeat(200_000)}</p>`, text, variables });
  assert.is(ok.status, 200, ok.text.slice(0, 300));
  assert.is(JSON.parse(ok.text).subject, 'Hi value 0');
  const tooMany = await preview({ subject: 'Hi', text: 'x', variables: { ...variables, v100: 'x' } });
  assertRefused(tooMany, 422, 'invalid_template_variables', /at most 100 variables/);
  const nested = await timed(t, 'POST', `/v1/templates/preview?projectId=${w.projectId}`, deepObject(3), session(w, w.viewer));
  assertRefused(nested, 422, 'invalid_template_variables');
});

/** A send whose subject holds one ISO-8859-1 byte, 0xE9 ("é"), as a Latin-1 or Windows-1252 client sends it. */
const latin1Send = (w: TemplateWorld) => Buffer.concat([
  Buffer.from(`{"from":"app@${w.domain}","to":"ann@${w.domain}","subject":"Caf`),
  Buffer.from([0xe9]),
  Buffer.from('","text":"x"}'),
]);

async function storedEmails(t: TestApp, w: TemplateWorld): Promise<number> {
  const r = await t.app.inject({ method: 'GET', url: '/v1/emails?limit=100', headers: bearer(w) });
  return (r.json().emails as unknown[]).length;
}

for (const contentType of ['application/json', 'application/json; charset=iso-8859-1', 'application/json; charset=utf-8']) {
  test(`a send with a byte that is not UTF-8 (${contentType}) is refused before anything is stored, not altered`, async ({ t, w }) => {
    t.clock.advance(61_000);
    const before = await storedEmails(t, w);
    const r = await t.app.inject({ method: 'POST', url: '/v1/emails', headers: { ...bearer(w), 'content-type': contentType }, payload: latin1Send(w) });
    assert.is(r.statusCode, 400, r.body);
    assert.is(r.json().error.code, 'validation_error');
    assert.match(r.json().error.message, /^body: must be UTF-8 JSON/);
    assert.is(await storedEmails(t, w), before);
  });
}

test('bytes that are not UTF-8 are refused on the other routes too (template create, preview, sign-in)', async ({ t, w }) => {
  const body = Buffer.concat([Buffer.from('{"name":"Caf'), Buffer.from([0xe9]), Buffer.from('","slug":"cafe","subject":"Hi","text":"x"}')]);
  for (const [url, headers] of [[`/v1/templates?projectId=${w.projectId}`, session(w)], [`/v1/templates/preview?projectId=${w.projectId}`, session(w)], ['/v1/session', {}]] as const) {
    const r = await t.app.inject({ method: 'POST', url, headers: { ...headers, 'content-type': 'application/json' }, payload: body });
    assert.is(r.statusCode, 400, `${url}: ${r.body}`);
    assert.equal(r.json().error, { code: 'validation_error', message: 'body: must be UTF-8 JSON; the body holds bytes that are not UTF-8' });
  }
  const list = await t.app.inject({ method: 'GET', url: `/v1/templates?projectId=${w.projectId}`, headers: session(w) });
  assert.equal(list.json().templates.filter((x: { slug: string }) => x.slug === 'cafe'), []);
});

test('a declared charset other than UTF-8 is refused, even when the bytes happen to be ASCII', async ({ t, w }) => {
  for (const charset of ['iso-8859-1', 'utf-16', 'windows-1252', '"us-ascii"']) {
    t.clock.advance(61_000);
    const r = await t.app.inject({
      method: 'POST', url: '/v1/emails', headers: { ...bearer(w), 'content-type': `application/json; charset=${charset}` },
      payload: JSON.stringify({ from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: 'Hi', text: 'x' }),
    });
    assert.is(r.statusCode, 400, `${charset}: ${r.body}`);
    assert.is(r.json().error.message, `body: must be UTF-8 JSON; charset=${charset.replace(/"/g, '')} is not accepted (declare charset=utf-8, or none)`);
  }
});

test('UTF-8 bodies, with charset=utf-8 in any spelling or none, keep every character as sent', async ({ t, w }) => {
  for (const contentType of ['application/json', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'Application/JSON; Charset=UTF8']) {
    t.clock.advance(61_000);
    const subject = 'Café \u{1F600} Ω';
    const r = await t.app.inject({
      method: 'POST', url: '/v1/emails', headers: { ...bearer(w), 'content-type': contentType },
      payload: Buffer.from(JSON.stringify({ from: `app@${w.domain}`, to: `ann@${w.domain}`, subject, text: 'x' }), 'utf8'),
    });
    assert.is(r.statusCode, 202, `${contentType}: ${r.body}`);
    const detail = await t.app.inject({ method: 'GET', url: `/v1/emails/${r.json().id}`, headers: bearer(w) });
    assert.is(detail.json().subject, subject);
  }
});

test('charsetOf reads the parameter as RFC 9110 writes it', () => {
  assert.is(charsetOf('application/json'), null);
  assert.is(charsetOf(undefined), null);
  assert.is(charsetOf('application/json; charset=UTF-8'), 'utf-8');
  assert.is(charsetOf('application/json ; CHARSET = "utf-8" ; q=1'), 'utf-8');
  assert.is(charsetOf('application/json; boundary=x; charset=latin1'), 'latin1');
});

test.run();
