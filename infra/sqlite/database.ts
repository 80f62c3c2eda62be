// Opening and transacting on the embedded sqlite file shared by the sqlite adapters.
// Every adapter creates its own tables (CREATE TABLE IF NOT EXISTS), so they can share one
// file or use separate ones.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/** How long a write waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;

export function openDatabase(path: string): DatabaseSync {
  if (path !== ':memory:' && !path.startsWith('file:')) mkdirSync(dirname(path), { recursive: true });
  const db = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    // WAL lets readers (subscriptions, other processes) run while a writer commits;
    // NORMAL skips the fsync per commit, which WAL makes safe against process crashes
    // (only an OS crash or power loss can drop the last commits).
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/**
 * Runs `work` inside BEGIN IMMEDIATE ... COMMIT. IMMEDIATE takes the write lock up front, so
 * a read-then-write inside `work` cannot be invalidated by another connection's commit
 * (a deferred transaction would fail with SQLITE_BUSY_SNAPSHOT instead of waiting).
 * `work` must be synchronous: no other code of this process may run inside the transaction.
 */
export function immediateTransaction<T>(db: DatabaseSync, work: () => T): T {
  db.exec('BEGIN IMMEDIATE');
  try {
    const result = work();
    db.exec('COMMIT');
    return result;
  } catch (error) {
    if (db.isTransaction) db.exec('ROLLBACK');
    throw error;
  }
}
