// An email whose admission this version cannot read (EmailAccepted written at a newer schema
// version: a rollback, or an older process still running beside a newer one) folds to "nothing
// admitted" (domain/email/upcast.ts never guesses). A retry under its Idempotency-Key is then
// neither a replay this version can answer nor a first attempt: it is refused with 503
// service_unavailable and Retry-After, whatever its body, and nothing is appended after the
// admission it cannot read (which a sender of either version would then deliver as a second
// email), nothing charged.
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { UNREADABLE_ADMISSION_RETRY_AFTER_SECONDS } from '../domain/email/admission.ts';
import { basicSend, expectAccepted, expectError, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('a retry of an email whose admission was written by a newer version');
test.after(() => ref.close());

test('is refused 503 with Retry-After, the same body or another, and nothing is appended or charged', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const body = basicSend(t, { subject: 'from a newer version' });
  // What a newer Relay wrote for this request: today's admission, at schema version 2.
  const model = expectAccepted(await h.send(t.key, body, { idempotencyKey: 'model' }));
  const [written] = await h.stores.events.readStream(`email-${model.id}`);
  const emailId = h.emailIdFor(t.project._id, 'written-by-newer');
  const data = { ...(written.data as Record<string, unknown>), emailId, idempotencyKey: 'written-by-newer' };
  await h.stores.events.append(`email-${emailId}`, [{ id: randomUUID(), type: 'EmailAccepted', data, metadata: { ...written.metadata, schemaVersion: 2 } }], { expectedRevision: 'no_stream' });
  const usage = await t.usage();

  for (const retried of [body, { ...body, subject: 'another body' }]) {
    const retry = await h.send(t.key, retried, { idempotencyKey: 'written-by-newer' });
    expectError(retry, 503, 'service_unavailable');
    assert.is(retry.headers['retry-after'], String(UNREADABLE_ADMISSION_RETRY_AFTER_SECONDS));
  }
  const stream = await h.stores.events.readStream(`email-${emailId}`);
  assert.equal(stream.map((e) => [e.type, e.metadata.schemaVersion]), [['EmailAccepted', 2]], 'only the admission this version cannot read');
  assert.equal(await t.usage(), usage, 'nothing charged');
  // Other keys are admitted as ever.
  expectAccepted(await h.send(t.key, body, { idempotencyKey: 'another-key' }));
});

test.run();
