// Spec: Authentication 1–4 and Errors 401/403 on the /v1/emails endpoints: Bearer keys;
// missing, malformed, unknown or revoked keys are 401 invalid_api_key; a missing permission
// is 403 forbidden; a production key of a workspace not activated is 403 production_not_enabled.
// The key is checked before anything about the request is.
import { randomBytes } from 'node:crypto';
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type Harness, type HarnessRef } from './harness.ts';

const wellShapedUnknown = (prefix: string) => prefix + randomBytes(32).toString('base64url');

async function everyEndpoint(h: Harness, authorization: string | null, body: unknown) {
  const headers: Record<string, string> = authorization === null ? {} : { authorization };
  return [
    await h.request('POST', '/v1/emails', { key: null, headers, body }),
    await h.request('GET', '/v1/emails', { key: null, headers }),
    await h.request('GET', '/v1/emails/em_doesnotmatter', { key: null, headers }),
  ];
}

export function authenticationSuite(test: Test, ref: HarnessRef): void {
  test('a missing Authorization header is 401 invalid_api_key on every endpoint', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const response of await everyEndpoint(h, null, basicSend(t))) expectError(response, 401, 'invalid_api_key');
  });

  test('malformed, unknown and non-Bearer credentials are 401 invalid_api_key', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const malformed = [
      '', 'Bearer', 'Bearer ', `Basic ${Buffer.from(`${t.key.secret}:`).toString('base64')}`, `Token ${t.key.secret}`, t.key.secret,
      `Bearer ${t.key.secret.slice(0, -1)}`, `Bearer ${t.key.secret}x`, `Bearer ${t.key.secret.replace(/^rr_(test|live)_/, 'rr_prod_')}`,
      `Bearer ${wellShapedUnknown('rr_test_')}`, `Bearer ${wellShapedUnknown('rr_live_')}`, 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig',
    ];
    for (const authorization of malformed) {
      for (const response of await everyEndpoint(h, authorization, basicSend(t))) expectError(response, 401, 'invalid_api_key');
    }
  });

  test('a revoked key is 401 invalid_api_key; the same key worked before', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const key = await t.newKey();
    expectAccepted(await h.send(key, basicSend(t)));
    await t.revoke(key);
    for (const response of await everyEndpoint(h, `Bearer ${key.secret}`, basicSend(t))) expectError(response, 401, 'invalid_api_key');
    expectAccepted(await h.send(t.key, basicSend(t)));
  });

  test('a key without email:send is 403 forbidden on POST /v1/emails, and can read', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const reader = await t.newKey(['email:read']);
    expectError(await h.send(reader, basicSend(t)), 403, 'forbidden');
    assert.is((await h.request('GET', '/v1/emails', { key: reader.secret })).statusCode, 200);
  });

  test('a production key of a workspace not activated is 403 production_not_enabled, until activation', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'production', activated: false });
    assert.match(t.key.secret, /^rr_live_/);
    for (const response of await everyEndpoint(h, `Bearer ${t.key.secret}`, basicSend(t))) expectError(response, 403, 'production_not_enabled');
    await t.activate();
    const sent = expectAccepted(await h.send(t.key, basicSend(t)));
    assert.is(sent.test_mode, false);
    await t.activate(false);
    expectError(await h.send(t.key, basicSend(t)), 403, 'production_not_enabled');
  });

  test('development keys (rr_test_) need no activation', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    assert.match(t.key.secret, /^rr_test_/);
    assert.is(expectAccepted(await h.send(t.key, basicSend(t))).test_mode, true);
  });

  test('the key is checked before the body: an invalid body with a bad key is 401, with a read-only key 403', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const invalid = { from: 'not an address', unexpected: true };
    expectError(await h.send(null, invalid), 401, 'invalid_api_key');
    expectError(await h.send(wellShapedUnknown('rr_live_'), invalid), 401, 'invalid_api_key');
    expectError(await h.request('POST', '/v1/emails', { key: null, payload: '{not json' }), 401, 'invalid_api_key');
    expectError(await h.send(await t.newKey(['email:read']), invalid), 403, 'forbidden');
    expectError(await h.request('GET', '/v1/emails?limit=1000', { key: null }), 401, 'invalid_api_key');
    expectError(await h.request('GET', '/v1/emails/bad!id', { key: null }), 401, 'invalid_api_key');
  });

  test('the scheme name is case-insensitive', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    expectAccepted(await h.request('POST', '/v1/emails', { key: null, headers: { authorization: `bearer ${t.key.secret}` }, body: basicSend(t) }));
  });
}
