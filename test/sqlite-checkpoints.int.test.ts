// WAL checkpoints run on a thread of their own (infra/sqlite/checkpointer.ts), not inside a
// COMMIT on the event loop. What shows it from outside: committed pages reach the database file
// itself (not only the WAL) long before the WAL reaches the writer's automatic checkpoint
// threshold, which is where sqlite alone would first copy them. The control writes the same
// through a borrowed connection, which keeps sqlite's own checkpoints only.
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { waitUntil } from './support/eventually.ts';

const test = suite('sqlite checkpoints off the event loop');
const dir = mkdtempSync(join(tmpdir(), 'relay-checkpoints-'));
/** Well under the automatic checkpoint's 4,096 pages (16 MiB), well over an empty store. */
const WRITTEN = 2 * 1024 * 1024;

test.after(() => rmSync(dir, { recursive: true, force: true }));

async function fill(store: SqliteEventStore): Promise<void> {
  const payload = 'x'.repeat(8 * 1024);
  for (let stream = 0; stream < WRITTEN / (8 * 1024) / 8; stream++) {
    const events = Array.from({ length: 8 }, () => ({ id: randomUUID(), type: 'Filled', data: { payload } }));
    await store.append(`fill-${stream}`, events, { expectedRevision: 'no_stream' });
  }
}

const fileSize = (file: string) => statSync(file).size;

test('committed pages reach the database file before the WAL reaches the automatic checkpoint', async () => {
  const file = join(dir, 'own.db');
  const store = new SqliteEventStore(file);
  try {
    await fill(store);
    await waitUntil(() => fileSize(file) >= WRITTEN, 'the written events in the database file itself', 10_000);
    const walPages = fileSize(`${file}-wal`) / 4096;
    assert.ok(walPages < 4096, `the WAL (${walPages} pages) stayed under the automatic checkpoint threshold`);
  } finally {
    await store.close();
  }
});

test('control: through a borrowed connection (sqlite checkpoints on its own) they stay in the WAL', async () => {
  const file = join(dir, 'borrowed.db');
  const db = openDatabase(file);
  const store = new SqliteEventStore(db);
  try {
    await fill(store);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    assert.ok(fileSize(file) < WRITTEN / 2, `database file ${fileSize(file)} bytes: nothing checkpointed it yet`);
    assert.ok(fileSize(`${file}-wal`) >= WRITTEN, 'the events are in the WAL');
  } finally {
    await store.close();
    db.close();
  }
});

test("closing the store closes the thread's connection first, so the last close removes the WAL", async () => {
  const file = join(dir, 'closed.db');
  const store = new SqliteEventStore(file);
  await fill(store);
  await waitUntil(() => fileSize(file) >= WRITTEN, 'a checkpoint by the thread', 10_000);
  await store.close();
  assert.not.ok(existsSync(`${file}-wal`), 'no WAL left behind: no other connection was still open');
  const reopened = new DatabaseSync(file, { readOnly: true });
  try {
    const { n } = reopened.prepare('SELECT count(*) AS n FROM es_events').get() as { n: number };
    assert.is(n, WRITTEN / (8 * 1024));
  } finally {
    reopened.close();
  }
});

test.run();
