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
//
// openDatabase records which file it opened (device and inode: openedFile), so that the group
// commit can tell when the file at that path is no longer the one the connection writes (deleted
// or replaced while Relay runs: ./group-commit.ts). An error opening or preparing a database names
// its path, and says so when the data directory's file system has no space or inodes left (SQLite
// reports the -wal or -shm it could not create as "disk I/O error" or "unable to open database
// file").
import { chmodSync, closeSync, mkdirSync, openSync, statfsSync, statSync } from 'node:fs';
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

/** A file as the kernel knows it: the same device and inode is the same file, whatever its name. */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

const opened = new WeakMap<DatabaseSync, { path: string } & FileIdentity>();

/** The database file `db` was opened on by openDatabase, as it was then; undefined for any other connection. */
export const openedFile = (db: DatabaseSync): ({ path: string } & FileIdentity) | undefined => opened.get(db);

/** The identity of the file at `path` now; null when there is none. */
export function identityAt(path: string): FileIdentity | null {
  const stats = statSync(path, { bigint: true, throwIfNoEntry: false });
  return stats ? { dev: stats.dev, ino: stats.ino } : null;
}

export const sameFile = (a: FileIdentity | null, b: FileIdentity | null): boolean => a !== null && b !== null && a.dev === b.dev && a.ino === b.ino;

/** Primary result codes: SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN (a -wal or -shm with no inode left for it). */
const SQLITE_IOERR = 10;
const SQLITE_FULL = 13;
const SQLITE_CANTOPEN = 14;

/**
 * An error from opening or preparing the database at `path`, with the path named and, for an I/O
 * error, a full database or a file that cannot be opened, whether the file system holding it has
 * no room left (SQLite gives "disk I/O error" for a -wal or -shm it cannot create on a full disk,
 * "unable to open database file" when no inode is left for one). Keeps the original's
 * codes (errcode, code) and has it as its cause.
 */
function openFailure(path: string, error: unknown): Error {
  const original = error as Error & { errcode?: number; code?: string; errstr?: string };
  const message = original instanceof Error ? original.message : String(error);
  let cause = '';
  const primary = typeof original?.errcode === 'number' ? original.errcode & 0xff : null;
  if (primary === SQLITE_IOERR || primary === SQLITE_FULL || primary === SQLITE_CANTOPEN) {
    const dir = dirname(path);
    try {
      const fs = statfsSync(dir);
      if (fs.bavail === 0) cause = `: no space left on the device holding ${dir} (ENOSPC)`;
      else if (fs.files > 0 && fs.ffree === 0) cause = `: no inodes left on the device holding ${dir} (ENOSPC)`;
    } catch {
      // The directory cannot be looked at either: the original error says what it can.
    }
  }
  return Object.assign(new Error(`cannot open ${path}: ${message}${cause}`, { cause: error }), {
    ...(original?.code !== undefined ? { code: original.code } : {}),
    ...(original?.errcode !== undefined ? { errcode: original.errcode } : {}),
    ...(original?.errstr !== undefined ? { errstr: original.errstr } : {}),
  });
}

export function openDatabase(path: string): DatabaseSync {
  if (isDatabaseFile(path)) {
    mkdirSync(dirname(path), { recursive: true, mode: PRIVATE_DIR_MODE });
    // Created 0600 here rather than 0644 by sqlite (an empty file is an empty database);
    // 'a' never truncates a database another process made first.
    // (Node's errors name the path: ENOSPC, EROFS, EACCES.)
    closeSync(openSync(path, 'a', PRIVATE_FILE_MODE));
    restrictDatabaseFiles(path);
  }
  let db: DatabaseSync;
  try {
    db = new DatabaseSync(path, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw openFailure(path, error);
  }
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
    throw openFailure(path, error);
  }
  if (isDatabaseFile(path)) {
    restrictDatabaseFiles(path);
    // Stat of the path just after sqlite opened it: the file it opened (unless another was moved
    // there in between, which goes unseen).
    const identity = identityAt(path);
    if (identity) opened.set(db, { path, ...identity });
  }
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
