// Threads of one process on one database file (`relay start` runs the pipeline on a thread of
// its own): a thread must not act on rows another thread committed until a sync of the WAL has
// made them durable, though it cannot see the other thread's group commit
// (infra/sqlite/commit-counters.ts).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('durable reads across threads');
const dir = mkdtempSync(join(tmpdir(), 'relay-durable-threads-'));
test.after(() => rmSync(dir, { recursive: true, force: true }));

test('another thread\'s subscription delivers an event only after a sync that covers it, its own if the writer\'s is not done', async () => {
  const file = join(dir, 'relay.db');
  let releaseMain: () => void = () => {};
  const store = new SqliteEventStore(file, {
    commitHold: async ({ stage }) => {
      if (stage === 'sync') await new Promise<void>((resolve) => (releaseMain = resolve));
    },
  });
  await store.ping();
  const worker = new Worker(new URL('./support/durable-reads-thread.ts', import.meta.url), { workerData: { file } });
  const heard: Array<{ kind: string; streamId?: string }> = [];
  worker.on('message', (message: { kind: string; streamId?: string }) => heard.push(message));
  try {
    await waitUntil(() => heard.some((m) => m.kind === 'ready'), 'the other thread subscribed', 10_000);
    let answered = false;
    const append = store.append('s-1', [{ id: randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' }).then(() => (answered = true));
    // The other thread reads the row (committed, not synced) and asks for a sync before it acts.
    await waitUntil(() => heard.some((m) => m.kind !== 'ready'), 'the other thread reacted to the commit', 10_000);
    assert.equal(heard.filter((m) => m.kind !== 'ready'), [{ kind: 'sync' }], 'it asked for a sync before delivering');
    assert.not.ok(answered, 'the writer\'s own sync is still held');
    // Its own sync covers the row: it delivers, though the writer's sync is still held.
    worker.postMessage('release');
    await waitUntil(() => heard.some((m) => m.kind === 'delivered'), 'the event is delivered after the sync', 10_000);
    assert.equal(heard.filter((m) => m.kind === 'delivered'), [{ kind: 'delivered', streamId: 's-1' }]);
    assert.not.ok(answered);
    releaseMain();
    await append;
  } finally {
    releaseMain();
    worker.postMessage('stop');
    await new Promise((resolve) => worker.once('exit', resolve));
    await store.close();
  }
});

test.run();
