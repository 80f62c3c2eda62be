// A retry of a request an older version of Relay admitted, whose body today's validation refuses
// (the rules grew stricter since: a List-Id without <…>, say), is a replay: admission's rule 1
// gives it its original answer whatever changed since (apps/services/admission.ts,
// replayOfRefused), with the rate slot a replay takes and no charge. Any other refused body stays
// refused as before: one under a key that names no email, one whose body is not the admitted one
// (400, not 409: it is still the invalid request it was), and one without a key. The older
// version's email is staged on the event store as it left it: its EmailAccepted, fingerprinted
// under the data directory's key.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { FINGERPRINT_PURPOSE } from '../apps/services/admission.ts';
import { canonicalJson } from '../apps/services/canonical-json.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { secretsOf } from './support/secrets.ts';
import { basicSend, expectAccepted, expectError, harnessRef, startEmbeddedHarness, type Harness, type Tenant } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('a refused body under the Idempotency-Key of an email admitted with it');
test.after(() => ref.close());

/** What an older version left: the email `body` was admitted as, under `idempotencyKey`. */
async function admittedBefore(h: Harness, t: Tenant, body: Record<string, unknown>, idempotencyKey: string): Promise<string> {
  const emailId = h.emailIdFor(t.project._id, idempotencyKey);
  const secrets = await secretsOf(h.instances[0].config.dataDir);
  const fingerprint = secrets.mac(FINGERPRINT_PURPOSE, canonicalJson(body)).toString('hex');
  const event = accepted({
    emailId, projectId: t.project._id, workspaceId: t.workspaceId, apiKeyId: t.key.id, testMode: false, fingerprint, idempotencyKey,
    from: t.from, fromAddress: t.from, fromDomain: t.domain, to: [t.to()], toAddresses: [t.to()], cc: [], ccAddresses: [], bccCount: 0, recipientCount: 1,
  });
  await h.stores.events.append(emailStreamId(emailId), [toNewEvent(event)], { expectedRevision: 'no_stream' });
  return emailId;
}

/** A body today's rules refuse (List-Id must hold a <list-id>) that versions before 2026-11-28 admitted. */
const refusedBody = (t: Tenant, subject: string): Record<string, unknown> => basicSend(t, { subject, headers: { 'List-Id': 'no angle brackets here' } });

test('control: today\'s validation refuses the body', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  expectError(await h.send(t.key, refusedBody(t, 'control')), 400, 'validation_error');
});

test('the same body under the same key gets the original answer, a rate slot and no charge; nothing is appended', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const body = refusedBody(t, 'replayed');
  const emailId = await admittedBefore(h, t, body, 'old-1');
  const before = await t.usage();
  const replay = await h.send(t.key, body, { idempotencyKey: 'old-1' });
  assert.equal(expectAccepted(replay), { id: emailId, status: 'queued', test_mode: false });
  assert.ok(replay.headers.ratelimit, 'the replay took its rate slot: RateLimit is answered as for any replay');
  assert.equal(await h.streamTypes(emailId), ['EmailAccepted']);
  assert.equal(await t.usage(), before);
});

test('a template send whose body today\'s rules refuse gets its replay too', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const body = { from: t.from, to: t.to(), template: 'no-such-template', variables: {}, headers: { 'List-Id': 'no angle brackets here' } };
  expectError(await h.send(t.key, body), 400, 'validation_error');
  const emailId = await admittedBefore(h, t, body, 'old-template');
  assert.equal(expectAccepted(await h.send(t.key, body, { idempotencyKey: 'old-template' })), { id: emailId, status: 'queued', test_mode: false });
});

test('any other refused body stays refused: another key, another body under the key, no key', async () => {
  const h = await ref.get();
  const t = await h.tenant();
  const body = refusedBody(t, 'admitted once');
  await admittedBefore(h, t, body, 'old-2');
  expectError(await h.send(t.key, body, { idempotencyKey: 'never-used' }), 400, 'validation_error');
  assert.equal(await h.streamTypes(h.emailIdFor(t.project._id, 'never-used')), []);
  // Not 409: the request is refused for its body, as it would be under any key.
  expectError(await h.send(t.key, refusedBody(t, 'another body'), { idempotencyKey: 'old-2' }), 400, 'validation_error');
  expectError(await h.send(t.key, body), 400, 'validation_error');
});

test.run();
