// Spec: Errors — every failure is {error: {code, message}}; internal errors say nothing about
// the inside; unknown routes are 404 in the same envelope.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { startTestApp } from '../support/app.ts';
import { basicSend, expectError, type HarnessRef } from './harness.ts';

export function errorsSuite(test: Test, ref: HarnessRef): void {
  // (GET / is the dashboard: apps/dashboard/.)
  test('unknown routes and methods are 404 in the envelope', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const [method, url] of [['GET', '/v1/nope'], ['GET', '/nope'], ['POST', '/v1/emails/batch'], ['DELETE', '/v1/emails'], ['PUT', '/v1/emails/em_x'], ['GET', '/v1/emails/a/b'], ['GET', '/v2/emails']] as const) {
      expectError(await h.request(method, url, { key: t.key.secret }), 404, 'not_found');
    }
  });

  test('malformed JSON and an empty JSON body are 400 validation_error in the envelope', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    for (const payload of ['{', '{"from": "a@b.test",}', "{'from': 1}", '']) {
      expectError(await h.request('POST', '/v1/emails', { key: t.key.secret, payload }), 400, 'validation_error');
    }
  });

  test('a body that is not JSON is refused in the envelope with validation_error', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const response = await h.request('POST', '/v1/emails', { key: t.key.secret, payload: 'from=a', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    assert.ok(response.statusCode === 400 || response.statusCode === 415, String(response.statusCode));
    expectError(response, response.statusCode, 'validation_error');
  });

  test('internal errors are 500 internal_error with a message that tells nothing of the inside', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    // An API whose document store is gone: every request fails inside.
    const broken = await startTestApp();
    await broken.stores.documents.close();
    try {
      for (const [method, url] of [['GET', '/v1/emails'], ['POST', '/v1/emails'], ['GET', '/v1/emails/em_x']] as const) {
        const response = await broken.app.inject({ method, url, headers: { authorization: `Bearer ${t.key.secret}`, 'content-type': 'application/json' }, payload: method === 'POST' ? JSON.stringify(basicSend(t)) : undefined });
        const message = expectError(response, 500, 'internal_error');
        assert.not.match(message, /sqlite|database|closed|\.ts\b|node:|    at /i);
      }
    } finally {
      await broken.close();
    }
  });
}
