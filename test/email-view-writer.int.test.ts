// EMAILS_PROJECTION.apply (apps/services/stream-projection.ts) on the embedded stores: gaps filled
// from the event store, redelivered events changing nothing, any arrival order giving the
// document that stream order gives, and a processor that is behind folding the stream's later
// events into one write.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../domain/email/events.ts';
import { upcastEmailEvent } from '../domain/email/upcast.ts';
import type { Stored } from '../infra/ports/document-store.ts';
import type { EventStore, StoredEvent } from '../infra/ports/event-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { applyToEmailView, type EmailView } from '../projections/email-view.ts';
import { CC_INDEX, TO_INDEX, BCC_INDEX, accepted, attempted, claimed, outcome, toNewEvent } from './support/email-events.ts';

const test = suite('email view writer (sqlite)');
const ctx = {} as { dir: string; events: SqliteEventStore; documents: SqliteDocumentStore };

test.before(() => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-email-view-writer-'));
  ctx.events = new SqliteEventStore(join(ctx.dir, 'events.db'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'documents.db'));
});

test.after(async () => {
  await ctx.events.close();
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

let emails = 0;
/** A new email whose stream holds accepted, claimed and sent (revisions 0..2), as stored. */
async function threeEventStream(): Promise<{ emailId: string; stored: StoredEvent[] }> {
  const emailId = `em_writer${++emails}`;
  const events = [
    accepted({ emailId }),
    claimed(),
    attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'sent')], { providerMessageId: 'prov-1' }),
  ];
  await ctx.events.append(emailStreamId(emailId), events.map(toNewEvent), { expectedRevision: 'no_stream' });
  const stored = await ctx.events.readStream(emailStreamId(emailId));
  assert.equal(stored.map((e) => e.revision), [0, 1, 2]);
  return { emailId, stored };
}

const project = (event: StoredEvent, collection?: string) => EMAILS_PROJECTION.apply(ctx.documents, ctx.events, event, collection);
const documentOf = (emailId: string, collection = 'emails') => ctx.documents.collection<EmailView>(collection).get(emailId);
const withoutVersion = (doc: Stored<EmailView> | null) => {
  assert.ok(doc, 'the email should have a document');
  const { _v, ...body } = doc!;
  void _v;
  return body;
};

test('given three events in email-<id> and no document, when only the third is projected, then the first two are filled from the store', async () => {
  const { emailId, stored } = await threeEventStream();
  await project(stored[2]);
  const doc = await documentOf(emailId);
  const expected = stored.map(upcastEmailEvent).reduce(applyToEmailView, null as EmailView | null);
  assert.equal(withoutVersion(doc), expected);
  assert.is(doc!.streamRevision, 2);
  assert.equal(doc!.events.map((e) => e.type), ['email.queued', 'email.processing', 'email.sent']);
  assert.is(doc!.status, 'sent');
});

test('given a document at revision 0, when the third event is projected, then the missing second one is filled too', async () => {
  const { emailId, stored } = await threeEventStream();
  await project(stored[0]);
  await project(stored[2]);
  const doc = await documentOf(emailId);
  assert.equal(doc!.events.map((e) => e.id), [stored[0].id, stored[1].id, `${stored[2].id}:sent`]);
  assert.is(doc!._v, 2, 'one insert and one compare-and-set replace');
});

test('given a projected event, when the same event is projected again, then one document and an unchanged _v', async () => {
  const { emailId, stored } = await threeEventStream();
  for (const event of stored) await project(event);
  const first = await documentOf(emailId);
  await project(stored[2]);
  await project(stored[1]);
  await project(stored[0]); // the first event is inserted without a read: its redelivery finds the document taken
  const second = await documentOf(emailId);
  assert.equal(second, first);
  assert.is(second!._v, first!._v);
  assert.is(await ctx.documents.collection<EmailView>('emails').count({ _id: emailId }), 1);
});

test('given events 1..3, when projected in the order 3, 1, 2, then the same document as in the order 1, 2, 3', async () => {
  const { emailId, stored } = await threeEventStream();
  for (const event of stored) await project(event, 'emails_in_order');
  for (const event of [stored[2], stored[0], stored[1]]) await project(event, 'emails_out_of_order');
  const inOrder = await documentOf(emailId, 'emails_in_order');
  const outOfOrder = await documentOf(emailId, 'emails_out_of_order');
  assert.equal(withoutVersion(outOfOrder), withoutVersion(inOrder));
  assert.is(inOrder!._v, 3);
  assert.is(outOfOrder!._v, 1, 'the later, older events wrote nothing');
});

test('given three events stored a while ago, when the first is projected (the processor is behind), then one write holds all three and the later records write nothing', async () => {
  const { emailId, stored } = await threeEventStream();
  const waited = (event: StoredEvent): StoredEvent => ({ ...event, recordedAt: new Date(Date.now() - 1000).toISOString() });
  await project(waited(stored[0]));
  const doc = await documentOf(emailId);
  assert.equal(withoutVersion(doc), stored.map(upcastEmailEvent).reduce(applyToEmailView, null as EmailView | null));
  assert.is(doc!._v, 1, 'one insert for the three events');
  await project(waited(stored[1]));
  await project(stored[2]);
  assert.is((await documentOf(emailId))!._v, 1, 'their own records found them applied');
});

test('given a document at revision 0 and a processor behind, when the third event is projected, then the gap before it and the events after it come in one read', async () => {
  const { emailId, stored } = await threeEventStream();
  await project(stored[0]);
  const later = toNewEvent(attempted([outcome(TO_INDEX, 'delivered')], { providerMessageId: 'prov-1' }));
  await ctx.events.append(emailStreamId(emailId), [later], { expectedRevision: 2 });
  const reads: Array<{ fromRevision?: number; maxCount?: number }> = [];
  const counting = {
    readStream: (streamId: string, options: { fromRevision?: number; maxCount?: number } = {}) => {
      reads.push(options);
      return ctx.events.readStream(streamId, options);
    },
  } as unknown as EventStore;
  await EMAILS_PROJECTION.apply(ctx.documents, counting, { ...stored[2], recordedAt: new Date(Date.now() - 1000).toISOString() });
  const all = await ctx.events.readStream(emailStreamId(emailId));
  const doc = await documentOf(emailId);
  assert.equal(withoutVersion(doc), all.map(upcastEmailEvent).reduce(applyToEmailView, null as EmailView | null));
  assert.is(doc!.streamRevision, 3);
  assert.is(doc!._v, 2, 'one insert and one replace holding revisions 1-3');
  assert.is(reads.length, 1, `one read: ${JSON.stringify(reads)}`);
});

test('given three events, when the first is projected as soon as it was stored, then the document holds it alone (no look-ahead while the processor keeps up)', async () => {
  const { emailId, stored } = await threeEventStream();
  await project({ ...stored[0], recordedAt: new Date().toISOString() });
  assert.is((await documentOf(emailId))!.streamRevision, 0);
});

test('given a stream whose first event is not an admission, when it is projected, then no document is written', async () => {
  const emailId = `em_writer${++emails}`;
  await ctx.events.append(emailStreamId(emailId), [toNewEvent(claimed())], { expectedRevision: 'no_stream' });
  const [claim] = await ctx.events.readStream(emailStreamId(emailId));
  await project(claim);
  assert.is(await documentOf(emailId), null);
});

test.run();
