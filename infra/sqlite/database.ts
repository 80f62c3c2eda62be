// Opening and transacting on the embedded sqlite file shared by the sqlite adapters.
// Every adapter creates its own tables (CREATE TABLE IF NOT EXISTS), so they can share one
// file or use separate ones.
//
// What is on disk is private to Relay's user: the directory is made 0700, and the database is
// created 0600 before sqlite opens it (sqlite gives its -wal and -shm files the database
// file's mode); files an older version left 0644 are tightened at open.
// Deleted rows are zeroed in place (secure_delete); `truncateWal` (after crypto-shredding)
// empties the WAL, where pages as they were before a deletion may otherwise linger until the
// WAL cycles over them.
import { chmodSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/** How long a write waits for another connection's write lock before failing with SQLITE_BUSY. */
export const BUSY_TIMEOUT_MS = 5000;
/** Modes of the embedded stores' files and of the directories made for them. */
export const PRIVATE_FILE_MODE = 0o600;
export const PRIVATE_DIR_MODE = 0o700;

/** True for a path of a database file (not ':memory:', '' or a URI). */
export const isDatabaseFile = (path: string) => path !== ':memory:' && path !== '' && !path.startsWith('file:');

/** chmod to `mode` when the file grants more; a file that is missing or not ours stays as it is. */
export function restrictMode(path: string, mode: number): void {
  try {
    if ((statSync(path).mode & 0o777 & ~mode) === 0) return;
    chmodSync(path, mode);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT' && code !== 'EPERM') throw error;
  }
}

const restrictDatabaseFiles = (path: string) => {
  for (const file of [path, `${path}-wal`, `${path}-shm`, `${path}-journal`]) restrictMode(file, PRIVATE_FILE_MODE);
};

export function openDatabase(path: string): DatabaseSync {
  if (isDatabaseFile(path)) {
    mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR_MODE });
    // Created 0600 here rather than 0644 by sqlite (an empty file is an empty database);
    // 'a' never truncates a database another process made first.
    closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
    restrictDatabaseFiles(path);
  }
  const db = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  try {
    // WAL lets readers (subscriptions, other processes) run while a writer commits.
    // NORMAL: COMMIT does not fsync; the group commit syncs the WAL itself, off the event loop,
    // before it tells anyone a write happened (./group-commit.ts). Checkpoints still sync the
    // WAL before copying it and the database after.
    db.exec('PRAGMA journal_mode = WAL');
    db.exec('PRAGMA synchronous = NORMAL');
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    // Deleted content (a shredded content key, pruned log records) is overwritten with zeros
    // instead of staying readable in a free page or free block of the file.
    db.exec('PRAGMA secure_delete = ON');
    // The WAL keeps its size when it restarts after a checkpoint (up to 64 MiB), so commits
    // overwrite blocks already allocated: an fdatasync then needs no file-size update and
    // takes a third of the time of one that grows the file (measured 0.24 vs 0.72 ms). Stale
    // frames past the live ones are overwritten as the WAL cycles; where that is not soon
    // enough (a shredded content key), the store truncates the WAL itself (truncateWal).
    db.exec('PRAGMA journal_size_limit = 67108864');
    // Checkpoints run inside the commit that crosses this many WAL pages, on the event loop:
    // fewer, larger ones (16 MiB instead of 4) write each hot page once per cycle.
    db.exec('PRAGMA wal_autocheckpoint = 4096');
  } catch (error) {
    db.close();
    throw error;
  }
  if (isDatabaseFile(path)) restrictDatabaseFiles(path);
  return db;
}

/**
 * Copies the WAL into the database and truncates it to zero bytes, so that pages as they were
 * before a deletion survive in neither file. False at once when another connection holds the
 * write lock or a reader keeps part of the WAL in use: the caller tries again later, on a timer.
 * A checkpoint that waited for them inside sqlite's busy handler would block the event loop
 * for the whole busy timeout (a backup or an export holds a read snapshot for minutes).
 */
export function truncateWal(db: DatabaseSync): boolean {
  // Executed, not prepared once: SQLite applies the busy timeout when it prepares a statement
  // (see GroupCommit's tryBegin).
  db.exec('PRAGMA busy_timeout = 0');
  try {
    const result = db.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get() as { busy: number; log: number; checkpointed: number } | undefined;
    return result === undefined || result.busy === 0;
  } finally {
    db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}
