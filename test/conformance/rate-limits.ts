// Spec: Limits — development keys 15 accepted requests per 60-second window that starts with
// the first accepted request; production keys 100 per second; workspaces 200 per second.
// Rule 3: replays and suppressed requests count, rejected ones do not. Rule 4: reads are not
// limited. Errors: 429 rate_limit_exceeded whose message states the wait in seconds; with
// Retry-After and the IETF RateLimit headers.
import type { Test } from 'uvu';
import * as assert from 'uvu/assert';
import { basicSend, expectAccepted, expectError, type Harness, type HarnessRef, type Key, type Response, type Tenant } from './harness.ts';

/** Asserts a 429 rate_limit_exceeded and returns the wait it announces (message = Retry-After). */
function expectLimited(response: Response, policy: string): number {
  const message = expectError(response, 429, 'rate_limit_exceeded');
  const stated = /retry in (\d+) seconds?/.exec(message);
  assert.ok(stated, `the message states the wait: "${message}"`);
  const retryAfter = String(response.headers['retry-after']);
  assert.match(retryAfter, /^[1-9]\d*$/);
  assert.is(Number(stated![1]), Number(retryAfter), 'message and Retry-After agree');
  assert.match(String(response.headers['ratelimit-policy']), new RegExp(`"${policy}";q=\\d+;w=\\d+`));
  assert.match(String(response.headers.ratelimit), new RegExp(`"${policy}";r=0;t=\\d+`));
  return Number(retryAfter);
}

async function sendN(h: Harness, t: Tenant, n: number, key: Key = t.key, body: Record<string, unknown> = {}) {
  for (let i = 0; i < n; i++) expectAccepted(await h.send(key, basicSend(t, { subject: `n${i}`, ...body })));
}

export function rateLimitsSuite(test: Test, ref: HarnessRef): void {
  test('development key: 15 requests in the window are accepted, the 16th is 429 with Retry-After and RateLimit headers', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    const first = await h.send(t.key, basicSend(t));
    expectAccepted(first);
    assert.is(first.headers['ratelimit-policy'], '"dev-key";q=15;w=60, "workspace";q=200;w=1');
    assert.match(String(first.headers.ratelimit), /^"dev-key";r=14;t=60, "workspace";r=\d+;t=\d+$/);
    h.clock.advance(20_000);
    await sendN(h, t, 14);
    const wait = expectLimited(await h.send(t.key, basicSend(t)), 'dev-key');
    assert.is(wait, 40, 'the window started with the first request, 20 s ago');
  });

  test('development key: the window lasts 60 s from its first accepted request; then a new one starts', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await sendN(h, t, 15);
    h.clock.advance(59_999);
    assert.is(expectLimited(await h.send(t.key, basicSend(t)), 'dev-key'), 1);
    h.clock.advance(1);
    await sendN(h, t, 15);
    h.clock.advance(30_000);
    assert.is(expectLimited(await h.send(t.key, basicSend(t)), 'dev-key'), 30);
  });

  test('development key: the window starts with the first accepted request, not at a rejected one', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    expectError(await h.send(t.key, basicSend(t, { to: 'someone@gmail.com' })), 422, 'test_recipient_not_allowed');
    h.clock.advance(50_000);
    expectAccepted(await h.send(t.key, basicSend(t)));
    // 70 s after the rejection, 20 s after the first accepted request: still its window.
    h.clock.advance(20_000);
    await sendN(h, t, 14);
    assert.is(expectLimited(await h.send(t.key, basicSend(t)), 'dev-key'), 40);
  });

  test('rejected requests do not count; suppressed ones do', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    for (let i = 0; i < 20; i++) {
      expectError(await h.send(t.key, basicSend(t, { from: `a@unverified-${i}.test` })), 422, 'domain_not_verified');
      expectError(await h.send(t.key, basicSend(t, { to: 'x@gmail.com' })), 422, 'test_recipient_not_allowed');
      expectError(await h.send(t.key, basicSend(t, { subject: '' })), 400, 'validation_error');
    }
    await t.suppress(t.to('blocked'));
    for (let i = 0; i < 5; i++) expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'suppressed');
    await sendN(h, t, 10);
    expectLimited(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'dev-key');
  });

  test('production key: 100 requests in one second are accepted, the 101st is 429; the next second accepts again', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const second = Math.ceil(h.clock.now().getTime() / 1000) * 1000 + 1000;
    h.clock.set(new Date(second));
    await sendN(h, t, 100);
    h.clock.advance(999);
    assert.is(expectLimited(await h.send(t.key, basicSend(t)), 'key'), 1);
    h.clock.advance(1);
    await sendN(h, t, 100);
    expectLimited(await h.send(t.key, basicSend(t)), 'key');
  });

  test('workspace: 200 requests per second across its keys and projects; the 201st is 429', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sibling = await t.sibling();
    const second = await t.newKey();
    h.clock.set(new Date(Math.ceil(h.clock.now().getTime() / 1000) * 1000 + 1000));
    await sendN(h, t, 100, t.key);
    await sendN(h, sibling, 60, sibling.key);
    await sendN(h, t, 40, second);
    const limited = await h.send(second, basicSend(t));
    expectLimited(limited, 'workspace');
    expectLimited(await h.send(sibling.key, basicSend(sibling)), 'workspace');
    // Another workspace is not affected.
    const stranger = await h.tenant();
    expectAccepted(await h.send(stranger.key, basicSend(stranger)));
  });

  test('a request refused by the workspace limit does not use up its key', async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const sibling = await t.sibling();
    h.clock.set(new Date(Math.ceil(h.clock.now().getTime() / 1000) * 1000 + 1000));
    await sendN(h, sibling, 100, sibling.key);
    const second = await sibling.newKey();
    await sendN(h, sibling, 100, second);
    for (let i = 0; i < 5; i++) expectLimited(await h.send(t.key, basicSend(t)), 'workspace');
    h.clock.advance(1000);
    await sendN(h, t, 100);
    expectLimited(await h.send(t.key, basicSend(t)), 'key');
  });

  test('a request refused with 429 stored nothing: retried with the same Idempotency-Key after the stated wait, it is admitted once', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    await sendN(h, t, 15);
    const body = basicSend(t, { subject: 'retried later' });
    const wait = expectLimited(await h.send(t.key, body, { idempotencyKey: 'after-429' }), 'dev-key');
    const emailId = h.emailIdFor(t.project._id, 'after-429');
    assert.equal(await h.streamTypes(emailId), [], 'nothing admitted under the key');
    h.clock.advance(wait * 1000);
    const sent = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'after-429' }));
    assert.is(sent.id, emailId);
    assert.equal(await h.send(t.key, body, { idempotencyKey: 'after-429' }).then((r) => r.json()), sent, 'and replays from then on');
    assert.equal(await h.streamTypes(emailId), ['EmailAccepted']);
  });

  test('reads are never limited', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    const ids: string[] = [];
    for (let i = 0; i < 15; i++) ids.push(expectAccepted(await h.send(t.key, basicSend(t))).id);
    expectLimited(await h.send(t.key, basicSend(t)), 'dev-key');
    for (let i = 0; i < 50; i++) {
      assert.is((await h.request('GET', '/v1/emails', { key: t.key.secret })).statusCode, 200);
      assert.is((await h.request('GET', `/v1/emails/${ids[i % ids.length]}`, { key: t.key.secret })).statusCode, 200);
    }
  });

  test('parallel requests never exceed a window: 40 at once with a development key admit exactly 15', async () => {
    const h = await ref.get();
    const t = await h.tenant({ environment: 'development' });
    const responses = await Promise.all(Array.from({ length: 40 }, (_, i) => h.send(t.key, basicSend(t, { subject: `p${i}` }))));
    assert.is(responses.filter((r) => r.statusCode === 202).length, 15);
    for (const r of responses.filter((r) => r.statusCode !== 202)) expectLimited(r, 'dev-key');
  });
}
