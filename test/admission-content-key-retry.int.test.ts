// An email's body is kept seven days from its admission, however many attempts its request took.
// With an Idempotency-Key every attempt targets one email id, and so one content key: a refused
// attempt stores none, and a key an earlier attempt left (it stopped between the key and the
// email) is taken over with a fresh seven days when the email is admitted. Spec: "Message bodies
// are retained for seven days"; 429: "Retry with the same idempotency key after waiting".
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { BODY_RETENTION_MS, contentKeyState, openContent, type ContentKey } from '../apps/services/content-vault.ts';
import { readEmailStream } from '../apps/services/email-stream.ts';
import { basicSend, expectAccepted, expectError, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const DAY = 24 * 60 * 60 * 1000;
const ref = harnessRef(startEmbeddedHarness);
const test = suite('a retry after a refusal keeps seven days of body retention');
test.after(() => ref.close());

test('422 domain_not_verified, domain verified 3 days later, retry: the body is still readable 5 days after acceptance', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const later = `later-${t.domain}`;
  const body = basicSend(t, { from: `hello@${later}` });
  expectError(await h.send(t.key, body, { idempotencyKey: 'verify-then-retry' }), 422, 'domain_not_verified');
  h.clock.advance(3 * DAY);
  await t.addDomain(later);
  const accepted = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'verify-then-retry' }));
  const state = await contentKeyState(h.stores.documents, accepted.id, new Date(h.clock.now().getTime() + 5 * DAY));
  assert.is(state, 'live', `body retention from acceptance is 7 days; 5 days after the 202 the content is ${state}`);
});

test('429 quota_exceeded on the 25th, retried with the same key after the month reset (8 days later): accepted with its body', async () => {
  const h = await ref.get();
  h.clock.set(new Date('2031-01-25T12:00:00.000Z'));
  const t = await h.tenant();
  await t.charge(5_000);
  const body = basicSend(t);
  expectError(await h.send(t.key, body, { idempotencyKey: 'quota-then-retry' }), 429, 'quota_exceeded');
  h.clock.set(new Date('2031-02-02T12:00:00.000Z'));
  const accepted = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'quota-then-retry' }));
  const state = await contentKeyState(h.stores.documents, accepted.id, h.clock.now());
  assert.is(state, 'live', `an email just answered 202 queued must have its body; its content key is ${state}`);
});

for (const [left, age] of [['live, 4 days of retention left', 3 * DAY], ['expired', 8 * DAY]] as const) {
  test(`a key an earlier attempt left (${left}) is taken over: it expires 7 days after the admission`, async () => {
    const h = await ref.get();
    const t = await h.tenant();
    const idempotencyKey = `left-${age}`;
    const emailId = h.emailIdFor(t.project._id, idempotencyKey);
    const keys = h.stores.documents.collection<ContentKey>(COLLECTIONS.contentKeys);
    const stored = new Date(h.clock.now().getTime() - age);
    await keys.insert({ _id: emailId, key: Buffer.alloc(32, 7).toString('base64'), expiresAt: new Date(stored.getTime() + BODY_RETENTION_MS).toISOString() });
    const accepted = expectAccepted(await h.send(t.key, basicSend(t), { idempotencyKey }));
    assert.is(accepted.id, emailId);
    const key = await keys.get(emailId);
    assert.is(key?.expiresAt, new Date(h.clock.now().getTime() + BODY_RETENTION_MS).toISOString());
    const [admitted] = await readEmailStream(h.stores.events, emailId);
    assert.is(admitted.type, 'EmailAccepted');
    const sealed = (admitted.data as { content: Parameters<typeof openContent>[2] }).content;
    const opened = await openContent(h.stores.documents, h.instances[0].ctx.services.secrets, sealed, new Date(h.clock.now().getTime() + 6 * DAY));
    assert.is(opened?.text, basicSend(t).text, 'the body opens with the key as stored');
  });
}

test.run();
