// Readers of the embedded stores must learn of a commit made by another process sharing the
// file at once, not at their next poll (150 ms by default): `relay api` in one process and
// `relay processor sender` in another is a documented way to run Relay. The tests give the
// readers a minute-long poll, so one that was not woken misses the deadline by far. (Measured
// between real processes, accepted → claimed: p75 106–150 ms with the poll alone, 11–15 woken.)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { waitUntil } from './support/eventually.ts';
import { startFixture } from './support/fixture-process.ts';

const MINUTE = 60_000;
/** Far above a woken reader's latency on a loaded machine, far below the minute-long poll. */
const WOKEN_WITHIN_MS = 10_000;

const appender = new URL('./fixtures/sqlite-event-appender.ts', import.meta.url);
const dir = mkdtempSync(join(tmpdir(), 'relay-cross-process-'));

const test = suite('cross-process wake-ups on the embedded stores');

test.after(() => rmSync(dir, { recursive: true, force: true }));

/** Appends one event to `stream` of `file` from another process, and waits for that process to end. */
async function appendInAnotherProcess(file: string, stream: string): Promise<void> {
  const child = startFixture(appender, [file, stream, 'optimistic', '1']);
  await child.waitForLine((line) => line.includes('"appended"'), 'the other process appended');
  assert.equal(await child.exited, { code: 0, signal: null });
}

test('an event another process appends reaches a subscription with a minute-long poll', async () => {
  const file = join(dir, 'subscription.db');
  const store = new SqliteEventStore(file, { pollIntervalMs: MINUTE });
  const seen: string[] = [];
  const subscription = store.subscribeAll({}, async (event: StoredEvent) => void seen.push(event.streamId));
  try {
    // Live and caught up (it saw this one), so it waits for a change.
    await store.append('here', [{ id: crypto.randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' });
    await waitUntil(() => seen.includes('here'), 'the subscription to be live', WOKEN_WITHIN_MS);
    await appendInAnotherProcess(file, 'there');
    await waitUntil(() => seen.includes('there'), 'the subscription to see the other process’s event', WOKEN_WITHIN_MS);
  } finally {
    await subscription.stop();
    await store.close();
  }
});

test('an event another process appends reaches a consumer group of the events topic with a minute-long poll', async () => {
  const file = join(dir, 'log.db');
  const store = new SqliteEventStore(file);
  const log = new SqliteLog(file, { eventsTopic: 'events', pollIntervalMs: MINUTE });
  const seen: string[] = [];
  try {
    const consumer = await log.consume({ group: 'g', topic: 'events', handle: async (record) => void seen.push(record.key) });
    try {
      await store.append('here', [{ id: crypto.randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' });
      await waitUntil(() => seen.includes('here'), 'the consumer to be live', WOKEN_WITHIN_MS);
      await appendInAnotherProcess(file, 'there');
      await waitUntil(() => seen.includes('there'), 'the consumer to see the other process’s event', WOKEN_WITHIN_MS);
    } finally {
      await consumer.stop();
    }
  } finally {
    await log.close();
    await store.close();
  }
});

test.run();
