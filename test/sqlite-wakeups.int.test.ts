// Writes made inside a deferred-durability scope are given before their batch commits; the
// embedded stores must still wake their readers in this process once the write is visible,
// rather than leave them to their next poll. The polls here are a minute long, so a reader
// that was not woken would miss the test's deadline by far.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deferDurability } from '../infra/ports/durability.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('sqlite wake-ups after writes in a durability scope');
const dir = mkdtempSync(join(tmpdir(), 'relay-wakeups-'));
const MINUTE = 60_000;

test.after(() => rmSync(dir, { recursive: true, force: true }));

test('an event appended in a scope reaches a live subscription of this process without its poll', async () => {
  const store = new SqliteEventStore(join(dir, 'events.db'), { pollIntervalMs: MINUTE });
  const seen: string[] = [];
  const subscription = store.subscribeAll({}, async (event) => void seen.push(event.streamId));
  try {
    // The subscription is live and has caught up (it saw the event before), and waits for a change.
    await store.append('before', [{ id: randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' });
    await waitUntil(() => seen.includes('before'), 'the subscription to be live', 10_000);
    await deferDurability(() => store.append('in-scope', [{ id: randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' }));
    await waitUntil(() => seen.includes('in-scope'), 'the subscription to see the event', 10_000);
  } finally {
    await subscription.stop();
    await store.close();
  }
});

test('a record published in a scope reaches a consumer of this process without its poll', async () => {
  const log = new SqliteLog(join(dir, 'log.db'), { pollIntervalMs: MINUTE });
  const seen: string[] = [];
  try {
    await log.ensureTopic('wakeups', 2);
    const consumer = await log.consume({ group: 'g', topic: 'wakeups', handle: async (record) => void seen.push(record.key) });
    try {
      // It has joined, fetched what there was, and waits for a change.
      await log.publish('wakeups', [{ key: 'before', value: 'v' }]);
      await waitUntil(() => seen.includes('before'), 'the consumer to be live', 10_000);
      await deferDurability(() => log.publish('wakeups', [{ key: 'in-scope', value: 'v' }]));
      await waitUntil(() => seen.includes('in-scope'), 'the consumer to see the record', 10_000);
    } finally {
      await consumer.stop();
    }
  } finally {
    await log.close();
  }
});

test.run();
