// Shows that the WAL truncate after shredding (`purgeDeleted`, infra/sqlite/document-store.ts)
// never waits for another connection's reader on the event loop. Retention shreds on the
// pipeline thread of `relay start`; a checkpoint that waited inside sqlite's busy handler (the
// 5 s busy timeout) for a reader's snapshot (a `sqlite3 .backup`, a long export) froze that
// thread: no delivery, no answer to /readyz or /metrics. Here the truncate gives up after a
// short retry on a timer, the purge stays pending, and the next pass does it once the reader
// has let go.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { shredExpiredContent, type ContentKey } from '../apps/services/content-vault.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';

const test = suite('the WAL truncate after shredding');

test('a reader holding a snapshot does not freeze the event loop of the thread that shreds; the next pass purges', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-truncate-'));
  const file = join(dir, 'relay.db');
  const walSize = () => statSync(`${file}-wal`).size;
  const documents = new SqliteDocumentStore(file);
  const keys = documents.collection<ContentKey>(COLLECTIONS.contentKeys);
  const past = new Date(Date.now() - 60_000).toISOString();
  await keys.insert({ _id: 'key-1', key: 'a2V5', expiresAt: past, usableFrom: past } as unknown as ContentKey);
  // Another connection (a backup, an export) reading: its snapshot keeps the WAL in use.
  const other = new DatabaseSync(file);
  other.exec('BEGIN');
  other.prepare('SELECT count(*) FROM sqlite_master').get();
  let reading = true;
  let maxGap = 0;
  let last = Date.now();
  const tick = setInterval(() => {
    const now = Date.now();
    maxGap = Math.max(maxGap, now - last);
    last = now;
  }, 5);
  try {
    assert.is(await shredExpiredContent(documents, new Date()), 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok(maxGap < 1_000, `the event loop was blocked for ${maxGap} ms by the WAL truncate waiting for a reader`);
    assert.ok(walSize() > 0, 'the WAL could not be truncated under the reader');
    other.exec('ROLLBACK');
    reading = false;
    // Nothing left to shred: the pass purges because the last one could not.
    assert.is(await shredExpiredContent(documents, new Date()), 0);
    assert.is(walSize(), 0, 'the next pass truncated the WAL');
  } finally {
    clearInterval(tick);
    if (reading) other.exec('ROLLBACK');
    other.close();
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
