// An admitted email's event must fit in one record of the log (apps/services/event-size.ts). A
// send request is at most 10 MiB, but a template multiplies its variables (one of 10,000
// characters used 200 times renders 2,000,000), and a control character takes 6 bytes in the
// event's JSON, 8 once sealed and base64'd: such a send made a 17.6 MB event, which Kafka (16 MiB
// per record on the events topic) refused forever, holding up every email after it. Shown here:
// - a template send whose event would be just over MAX_EVENT_BYTES is 413 message_too_large and
//   leaves nothing (no event, no content key: its Idempotency-Key then admits another body);
// - the worst-escaped direct send of 10 MiB (text of control characters) is still admitted;
// - on Kafka (RELAY_KAFKA_BROKERS), an email whose event is just under MAX_EVENT_BYTES is
//   forwarded, and so is the email admitted after it: the budget is one the log carries.
import { randomUUID } from 'node:crypto';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startForwarder } from '../apps/pipeline/forwarder.ts';
import { encodeEvent } from '../apps/pipeline/topics.ts';
import { emailIdFor } from '../apps/services/admission.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { MAX_EVENT_BYTES } from '../infra/events-topic.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { waitUntil } from './support/eventually.ts';
import { createTemplateAs, populateTemplateWorld, sendEmail, startAppIn, type TemplateWorld } from './support/templates.ts';
import type { TestApp } from './support/app.ts';

const brokers = process.env.RELAY_KAFKA_BROKERS?.split(',').map((b) => b.trim()).filter(Boolean) ?? [];
const MiB = 1024 * 1024;

/**
 * The template's text uses {{v}} 200 times; with v made of `count` control characters the
 * sealed text takes 200 × count × 6 × 4/3 = 1,600 × count bytes of the event, besides about
 * 2 KB of the rest (addresses, ids, the stored event's frame).
 */
const BYTES_PER_CONTROL_CHARACTER = 1_600;
const justUnder = Math.floor((MAX_EVENT_BYTES - 16 * 1024) / BYTES_PER_CONTROL_CHARACTER);
const justOver = Math.ceil(MAX_EVENT_BYTES / BYTES_PER_CONTROL_CHARACTER) + 1;

async function world(env: Record<string, string> = {}): Promise<{ t: TestApp; w: TemplateWorld; slug: string }> {
  const t = await startAppIn('embedded', env);
  const w = await populateTemplateWorld(t);
  const { slug } = await createTemplateAs(w, { slug: 'big', subject: 'Hello', text: '{{v}}'.repeat(200) });
  return { t, w, slug };
}

const templateSend = (w: TemplateWorld, slug: string, count: number) => ({
  from: `Acme <hello@${w.domain}>`, to: `ann@${w.domain}`, template: slug, variables: { v: '\u0001'.repeat(count) },
});

const acceptedOf = async (t: TestApp, emailId: string): Promise<StoredEvent> =>
  (await t.stores.events.readStream(emailStreamId(emailId))).find((e) => e.type === 'EmailAccepted')!;

const test = suite('the size of an email event');

test('a template send whose event would be over the budget is 413 message_too_large and leaves nothing behind', async () => {
  const { t, w, slug } = await world();
  try {
    const headers = { 'idempotency-key': 'big-1' };
    const refused = await sendEmail(t, w.apiKey, templateSend(w, slug, justOver), headers);
    assert.is(refused.statusCode, 413, refused.body);
    assert.is(refused.json().error.code, 'message_too_large');
    assert.match(refused.json().error.message, /over the 15 MiB an email may take/);

    const emailId = emailIdFor(w.projectId, 'big-1');
    const keys = t.stores.documents.collection(COLLECTIONS.contentKeys);
    assert.equal(await t.stores.events.readStream(emailStreamId(emailId)), []);
    assert.is(await keys.get(emailId), null);

    // Nothing was kept under the key: another body is a first admission, not 409.
    const admitted = await sendEmail(t, w.apiKey, templateSend(w, slug, 10), headers);
    assert.is(admitted.statusCode, 202, admitted.body);
    assert.is(admitted.json().id, emailId);
    assert.ok(await acceptedOf(t, emailId));
    assert.ok(await keys.get(emailId));
  } finally {
    await t.close();
  }
});

test('a direct send of 10 MiB whose text is all control characters (6 bytes each in JSON) is admitted', async () => {
  const { t, w } = await world();
  try {
    const frame = { from: `Acme <hello@${w.domain}>`, to: `ann@${w.domain}`, subject: 'Hello', text: '' };
    const count = Math.floor((10 * MiB - Buffer.byteLength(JSON.stringify(frame))) / 6);
    const body = JSON.stringify({ ...frame, text: '\u0001'.repeat(count) });
    assert.ok(Buffer.byteLength(body) <= 10 * MiB && Buffer.byteLength(body) > 10 * MiB - 6);
    const response = await t.app.inject({
      method: 'POST', url: '/v1/emails', payload: body,
      headers: { authorization: `Bearer ${w.apiKey}`, 'content-type': 'application/json' },
    });
    assert.is(response.statusCode, 202, response.body.slice(0, 500));
    const bytes = Buffer.byteLength(encodeEvent(await acceptedOf(t, response.json().id)));
    assert.ok(bytes > 13 * MiB && bytes <= MAX_EVENT_BYTES, `event of ${bytes} bytes`);
  } finally {
    await t.close();
  }
});

(brokers.length > 0 ? test : test.skip)('on Kafka, an email whose event is just under the budget is forwarded, and so is the one after it', async () => {
  const { t, w, slug } = await world({ RELAY_KAFKA_BROKERS: brokers.join(','), RELAY_LOG_NAMESPACE: `event_size_${randomUUID().slice(0, 8)}` });
  const errors: string[] = [];
  let forwarder: Awaited<ReturnType<typeof startForwarder>> | undefined;
  try {
    const large = await sendEmail(t, w.apiKey, templateSend(w, slug, justUnder));
    assert.is(large.statusCode, 202, large.body);
    const bytes = Buffer.byteLength(encodeEvent(await acceptedOf(t, large.json().id)));
    assert.ok(bytes > MAX_EVENT_BYTES - 64 * 1024 && bytes <= MAX_EVENT_BYTES, `event of ${bytes} bytes`);
    const next = await sendEmail(t, w.apiKey, templateSend(w, slug, 10));
    assert.is(next.statusCode, 202, next.body);
    const last = (await acceptedOf(t, next.json().id)).position;

    forwarder = await startForwarder({ events: t.stores.events, log: t.stores.log, documents: t.stores.documents, namespace: t.config.logNamespace, onError: (e) => errors.push(e.message) });
    await waitUntil(() => forwarder!.position() === last || errors.length >= 3, 'the forwarder to publish both events or fail', 15_000).catch(() => {});
    assert.is(forwarder.position(), last, `an event of ${bytes} bytes is not forwarded: ${[...new Set(errors)].join(' | ')}`);
  } finally {
    await forwarder?.stop();
    await t.close();
  }
});

if (brokers.length === 0) console.log('the Kafka case is skipped: RELAY_KAFKA_BROKERS not set (eval "$(bash infra/engines/engines.sh up)")');
test.run();
