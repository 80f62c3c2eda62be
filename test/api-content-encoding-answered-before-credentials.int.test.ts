// Credentials are refused before a body's content coding: a caller without them (no key, a wrong
// key, no session, a foreign Origin at sign-in) sending `Content-Encoding: gzip` gets the refusal
// its credentials are owed (401 invalid_api_key or session_required, 403 origin_not_allowed), with
// the bounds that go with it, and the 415 unsupported_content_encoding only once past them
// (docs/architecture.md: the key is checked as soon as the headers are in; MANAGEMENT-API.md,
// Order of checks: Origin → session → request validation; the spec: a missing, invalid or revoked
// key is 401). The 415 is decided in the preParsing hook, after every route's onRequest checks.
import { gzipSync } from 'node:zlib';
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';

let t: TestApp;

test.before(async () => {
  t = await startTestApp({}, { listen: true });
});

test.after(async () => {
  await t?.close();
});

const gzipped = gzipSync(JSON.stringify({ from: 'news@example.com', to: ['reader@example.org'], subject: 'Hello', text: 'Hello' }));

async function post(path: string, headers: Record<string, string>): Promise<{ status: number; code: string }> {
  const response = await fetch(`${t.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', ...headers },
    body: gzipped,
  });
  const body = await response.json() as { error?: { code?: string } };
  return { status: response.status, code: String(body.error?.code) };
}

test('a send without an API key, its body gzip-encoded, is told 401 invalid_api_key, not 415', async () => {
  assert.equal(await post('/v1/emails', {}), { status: 401, code: 'invalid_api_key' });
});

test('a send with a key that does not exist, its body gzip-encoded, is told 401 invalid_api_key, not 415', async () => {
  assert.equal(await post('/v1/emails', { authorization: 'Bearer rr_live_doesnotexist0000000000000000' }), { status: 401, code: 'invalid_api_key' });
});

test('a management write without a session, its body gzip-encoded, is told 401 session_required, not 415', async () => {
  assert.equal(await post('/v1/workspaces', {}), { status: 401, code: 'session_required' });
});

test('a sign-in from a foreign Origin, its body gzip-encoded, is told 403 origin_not_allowed, not 415', async () => {
  assert.equal(await post('/v1/session', { origin: 'https://attacker.example' }), { status: 403, code: 'origin_not_allowed' });
});

test.run();
