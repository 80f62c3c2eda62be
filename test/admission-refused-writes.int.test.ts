// A send that is refused writes nothing that outlives it: the email's content key (kept seven
// days) is stored only once the request is past its rate limit and the admission rules, and a
// request refused by its quota after storing it takes it back. So a client answered 429 or 422
// cannot keep creating durable documents at whatever rate it sends.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { basicSend, expectAccepted, expectError, harnessRef, startEmbeddedHarness, type Harness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('refused sends leave no content key behind');
test.after(() => ref.close());

const contentKeys = (h: Harness) => h.stores.documents.collection(COLLECTIONS.contentKeys).count();

test('a development key past its 15 requests: 200 more requests answered 429 rate_limit_exceeded store no content key', async () => {
  const h = await ref.get();
  const t = await h.tenant({ environment: 'development' });
  const before = await contentKeys(h);
  for (let i = 0; i < 15; i++) expectAccepted(await h.send(t.key, basicSend(t, { subject: `ok ${i}` })));
  assert.is(await contentKeys(h) - before, 15, 'each accepted email has its key');
  const after15 = await contentKeys(h);
  for (let i = 0; i < 200; i++) expectError(await h.send(t.key, basicSend(t, { subject: `refused ${i}` })), 429, 'rate_limit_exceeded');
  const after = await contentKeys(h);
  assert.is(after - after15, 0, `${after - after15} content keys (kept 7 days) were written by requests answered 429`);
});

test('422 (sender domain not verified, development recipient outside the project) store no content key, with or without an Idempotency-Key', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const dev = await h.tenant({ environment: 'development' });
  const before = await contentKeys(h);
  expectError(await h.send(t.key, basicSend(t, { from: 'hello@unverified.example.test' })), 422, 'domain_not_verified');
  expectError(await h.send(t.key, basicSend(t, { from: 'hello@unverified.example.test' }), { idempotencyKey: 'refused-422' }), 422, 'domain_not_verified');
  expectError(await h.send(dev.key, basicSend(dev, { to: 'someone@elsewhere.example.test' })), 422, 'test_recipient_not_allowed');
  assert.is(await contentKeys(h) - before, 0);
});

test('429 quota_exceeded: the key stored alongside the refused charge is taken back', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  await t.charge(5_000);
  const before = await contentKeys(h);
  for (let i = 0; i < 5; i++) expectError(await h.send(t.key, basicSend(t, { subject: `over ${i}` })), 429, 'quota_exceeded');
  expectError(await h.send(t.key, basicSend(t), { idempotencyKey: 'refused-quota' }), 429, 'quota_exceeded');
  assert.is(await contentKeys(h) - before, 0);
  // A suppressed email is not charged: it is stored, with its key, whatever the quota.
  await t.suppress(t.to('blocked'));
  expectAccepted(await h.send(t.key, basicSend(t, { to: t.to('blocked') })), 'suppressed');
  assert.is(await contentKeys(h) - before, 1);
});

test.run();
