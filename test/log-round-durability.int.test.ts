// The embedded log runs a round's handlers in one deferred-durability scope
// (infra/sqlite/log.ts, #round): a handler's writes to another store are given to it as soon
// as they take effect, so a partition's records do not each wait for a sync, while the group's
// offset is written only once those writes are durable, and a round whose writes were lost
// hands its records over again.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { DuplicateKeyError } from '../infra/ports/document-store.ts';
import type { LogConsumer } from '../infra/ports/log.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { commitHoldSwitch } from './support/commit-hold.ts';
import { waitUntil } from './support/eventually.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-log-round-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const TOPIC = 'relay.events';
const RECORDS = 5;
const test = suite('sqlite log: a round\'s writes become durable before its offsets');

/** An event store with the log as its view, a document store of its own file whose commits the test holds, one stream of RECORDS events. */
async function opened() {
  const holds = commitHoldSwitch();
  const eventsFile = join(dir, `${randomUUID()}.db`);
  const events = new SqliteEventStore(eventsFile, { pollIntervalMs: 50 });
  const log = new SqliteLog(eventsFile, { eventsTopic: TOPIC, pollIntervalMs: 50, retryDelayMs: 20 });
  const documents = new SqliteDocumentStore(join(dir, `${randomUUID()}.db`), { commitHold: holds.hold });
  await log.ensureTopic(TOPIC, 8);
  const stream = `email-${randomUUID()}`;
  await events.append(stream, Array.from({ length: RECORDS }, (_, n) => ({ id: randomUUID(), type: 'Happened', data: { n } })), { expectedRevision: 'no_stream' });
  const handled: string[] = [];
  const docs = documents.collection<{ _id: string }>('handled');
  let consumer: LogConsumer | null = null;
  return {
    holds, log, docs, handled,
    /** A consumer that writes one document per record, as an idempotent projector does. */
    start: async () => {
      consumer = await log.consume({ group: 'g', topic: TOPIC, handle: async (record) => {
        handled.push(record.offset);
        await docs.insert({ _id: record.offset }).catch((error: unknown) => {
          if (!(error instanceof DuplicateKeyError)) throw error;
        });
      } });
    },
    committed: async () => (await log.groupOffsets(TOPIC, ['g'])).find((o) => o.end !== '0')?.committed ?? null,
    close: async () => {
      holds.set(null);
      await consumer?.stop();
      await log.close();
      await events.close();
      await documents.close();
    },
  };
}

test('the records of a partition are handled while the first one\'s write is still syncing; the offset waits for the sync', async () => {
  const t = await opened();
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let syncsAsked = 0;
  t.holds.set(async ({ stage }) => {
    if (stage !== 'sync') return;
    syncsAsked++;
    await released;
  });
  try {
    await t.start();
    await waitUntil(() => t.handled.length === RECORDS && syncsAsked > 0, 'every record handled with the first sync held');
    // Past a few of the round's mid-way offset writes (every 100 ms): none may go before the sync.
    await new Promise((resolve) => setTimeout(resolve, 350));
    assert.is(await t.committed(), null, 'no offset written before the handlers\' writes are durable');
    release();
    await waitUntil(async () => (await t.committed()) === String(RECORDS), 'the offset written once they are');
    assert.equal(t.handled, ['0', '1', '2', '3', '4'], 'each record handled once');
  } finally {
    release();
    await t.close();
  }
});

test('a round whose writes were lost hands its records over again before its offset moves', async () => {
  const t = await opened();
  let failures = 0;
  t.holds.set(async ({ stage }) => {
    if (stage === 'commit' && failures++ === 0) throw new Error('disk on fire');
  });
  try {
    await t.start();
    await waitUntil(async () => (await t.committed()) === String(RECORDS), 'the group gets past every record');
    assert.ok(failures >= 2, 'the first commit failed and a later one went through');
    assert.is(t.handled.filter((offset) => offset === '0').length, 2, 'the first record was handed over again');
    for (let n = 0; n < RECORDS; n++) assert.ok(await t.docs.get(String(n)), `record ${n}'s write is there`);
  } finally {
    await t.close();
  }
});

test.run();
