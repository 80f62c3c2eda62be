// Group commit for one sqlite connection: the writes of concurrent requests share one
// transaction and one fsync instead of paying one each.
//
// The first write opens BEGIN IMMEDIATE; writes that arrive before the batch closes join it,
// each in its own savepoint, so one write's failure (a revision conflict, a taken unique key)
// rolls back that write only and never its neighbours (a write of one statement needs none,
// runStatement: SQLite undoes a failed statement itself and the transaction goes on). The
// batch commits on the next turn of the event loop (setImmediate runs after the I/O callbacks
// that queued the writes), or at once when it reaches its size or byte budget. No caller learns its result, success or
// failure, before the batch is durable, so an answer that depends on a write is never given
// for a write that a power loss could undo. (A refusal is held back too: it was decided on
// neighbours' writes that were not durable yet.)
//
// Durable means the WAL was fdatasync'd after COMMIT. The connection runs synchronous =
// NORMAL, so COMMIT itself does not sync; the sync runs on libuv's thread pool and the event
// loop goes on meanwhile (a blocking fsync per commit kept the loop waiting on the disk for
// 40 % of its time under load). One sync runs at a time per file; batches committed while it
// runs share the next one. Readers of this process that must not act on a commit before it is
// durable wait for durable() (the event store's stream reads and subscriptions do), whichever
// thread committed it. A sync that fails stops the file's writes for good (#failed).
//
// So does a file that is no longer the one at its path: relay.db or relay.db-wal deleted or
// replaced while the process runs (an operator's rm, a cleanup script, a restore moved into
// place). SQLite goes on writing to the unlinked files it holds open and notices nothing, but
// no start of Relay reads what they hold. After each sync, before anyone is answered, the WAL
// and the database file are looked up by their paths (two stats per batch, never per write) and
// compared with the files the connection opened (the WAL's descriptor, fstat'd once when it is
// opened; the database as openDatabase found it: ./database.ts). SQLite never replaces either
// file while a connection is open: a checkpoint, a WAL reset or truncation keep the same -wal
// file, which is deleted only when the last connection closes. A ping checks the same way
// (writable()), so that readiness tells it without traffic.
//
// Work must be synchronous (node:sqlite is), and nothing else may write on the connection
// while a batch is open: every writer of a connection goes through its GroupCommit
// (commitsFor), and every process opens one writing connection per file (./connections.ts).
//
// Waiting for another process's write lock never blocks the event loop: a batch holds its
// file's lock until the loop turns, so a process that slept in sqlite's busy handler on one
// file while holding a batch open on another could deadlock with a process doing the reverse.
// BEGIN is tried without waiting, and retried on a timer (up to the busy timeout).
//
// A write that fails on the file itself (a full disk, an I/O error), or because another
// connection held the write lock past the busy timeout (a sqlite3 shell or a backup tool left in
// a transaction: every write would fail the same way), is remembered until a commit that wrote
// succeeds (writeFailure; a commit that changed nothing, such as a sweep that found nothing to
// delete, appends nothing to the WAL and so says nothing of the disk): the stores' ping reports
// it, so readiness does not answer ready while every write fails. Writes keep being tried, and
// go through again once the disk has room or the lock is let go; a ping meanwhile tries a write
// of its own (writable()), so that readiness comes back even when no traffic reaches a process
// that is not ready.
import { basename } from 'node:path';
import { closeSync, fdatasync, fstatSync, openSync } from 'node:fs';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { currentDurabilityScope, reportLostWrites, type DurabilityBarrier, type DurabilityScope } from '../ports/durability.ts';
import { changeSignal, type ChangeSignal } from './change-signal.ts';
import { CommitCounters } from './commit-counters.ts';
import { BUSY_TIMEOUT_MS, identityAt, openedFile, sameFile, type FileIdentity } from './database.ts';

export interface GroupCommitLimits {
  /** Writes per batch before it commits without waiting for the turn to end. Default 512. */
  maxWrites?: number;
  /** Another connection holds the write lock: the first retry after this many ms, doubling up to `max`. Default 1 to 20. */
  lockRetryMs?: { first: number; max: number };
  /** Bytes (as the callers estimate them) per batch before it commits at once. Default 16 MiB. */
  maxBytes?: number;
  /** Tests only: see CommitHold. */
  hold?: CommitHold;
}

interface Settled {
  ok: boolean;
  /** Given to a deferred-durability scope before its batch was durable. */
  early?: true;
  /** The batch's own handle (#begun), not a write. */
  handle?: true;
  value: unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

interface Queued {
  work: () => unknown;
  bytes: number;
  /** The caller's deferred-durability scope: a success is given at once and the scope waits. */
  scope: DurabilityScope | undefined;
  /** Tells a result that is a refusal: like an error, it is given only once durable. */
  refused: ((value: unknown) => boolean) | undefined;
  /** The work changes the database with one statement at most (runStatement): no savepoint. */
  oneStatement: boolean;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

/**
 * Called before each COMMIT (stage 'commit') and before each sync of the WAL (stage 'sync')
 * with the database file and the number of writes; the commit or sync waits for it. For tests
 * only (an option of the embedded stores): it lets a test hold a batch back and observe that
 * nobody was answered, or kill the process before the commit.
 */
export type CommitHold = (batch: { file: string | null; writes: number; stage: 'commit' | 'sync' }) => Promise<void>;

export class GroupCommit implements DurabilityBarrier {
  readonly #db: DatabaseSync;
  readonly #maxWrites: number;
  readonly #maxBytes: number;
  readonly #lockRetryMs: { first: number; max: number };
  readonly #savepoint: StatementSync;
  readonly #release: StatementSync;
  readonly #rollbackTo: StatementSync;
  /** Notified whenever a transaction on this file ends: a waiting writer of another thread retries then. */
  readonly #released: ChangeSignal | null;
  /** Set while another process holds the write lock: writes queue until BEGIN succeeds. */
  #lockWait: NodeJS.Timeout | null = null;
  /** The WAL file, opened at the first commit; null for a database without one (in memory). */
  #walFd: number | null | undefined;
  /** The file #walFd is open on (fstat once, when it is opened). */
  #walIdentity: FileIdentity | null = null;
  /** Committed writes waiting for the next sync. */
  #unsynced: Settled[] = [];
  #syncing: Promise<void> | null = null;
  /** The writes the running sync covers (settled when it ends). */
  #inSync: Settled[] | null = null;
  #batch: Settled[] = [];
  /** Settles once the open batch is durable, or lost: what a deferred-durability scope waits for. */
  #batchDurable: DurabilityBarrier | null = null;
  #batchNumber = 0;
  /** Set for good when a sync of the WAL failed (#sync), or the files are no longer the ones at their paths (#replaced): no more writes, and no durable reads. */
  #failure: Error | null = null;
  /** The last write that failed on the file itself (full disk, I/O error) or on a lock held past the busy timeout, until a commit that wrote succeeds. */
  #writeFailure: Error | null = null;
  /** The write writable() tries while #writeFailure is set; one at a time. */
  #probe: Promise<boolean> | null = null;
  /** While #writeFailure is set: total_changes() when the open batch began, and whether a probe wrote in it. */
  #changesAtBegin: number | null = null;
  #probedInBatch = false;
  #bytes = 0;
  #open = false;
  #inWork = false;
  /** Set while a held commit is awaited: writes queue until it is done. */
  #committing: Promise<void> | null = null;
  #queued: Queued[] = [];
  #scheduled: NodeJS.Immediate | null = null;
  #hold: CommitHold | null;
  /** The file's commits and syncs as every thread of the process counts them; null in memory. */
  readonly #counters: CommitCounters | null;
  /** A sync run for readers (durable()) of rows another thread committed. */
  #readersSync: Promise<void> | null = null;
  #commitsBegun = 0n;

  constructor(db: DatabaseSync, limits: GroupCommitLimits = {}) {
    this.#db = db;
    this.#maxWrites = limits.maxWrites ?? 512;
    this.#maxBytes = limits.maxBytes ?? 16 * 1024 * 1024;
    this.#lockRetryMs = limits.lockRetryMs ?? { first: 1, max: 20 };
    this.#hold = limits.hold ?? null;
    this.#savepoint = db.prepare('SAVEPOINT group_write');
    this.#release = db.prepare('RELEASE group_write');
    this.#rollbackTo = db.prepare('ROLLBACK TO group_write');
    this.#released = db.location() ? changeSignal(db, 'write-lock-released') : null;
    this.#counters = db.location() ? CommitCounters.of(db.location()!) : null;
  }

  /**
   * Runs `work` now, inside the open batch, all or nothing; settles with its result (or its
   * error) once the batch is durably committed. `bytes` counts towards the byte budget.
   * Inside a deferred-durability scope (../ports/durability.ts) a success settles as soon as
   * `work` has run, and the scope waits for the batch instead. A refusal (an error, or a result
   * `refused` recognises, such as a compare-and-set that matched nothing) still settles only
   * once durable: it was decided on neighbours' writes, and a caller that re-reads to try again
   * must find them committed, or it would spin on the same refusal.
   */
  run<T>(work: () => T, bytes = 0, refused?: (value: T) => boolean): Promise<T> {
    return this.#enqueue(work, bytes, refused, false);
  }

  /**
   * run() for work that changes the database with one statement at most (reads before it are
   * fine): a failed statement changed nothing, so the write needs no savepoint of its own.
   */
  runStatement<T>(work: () => T, bytes = 0, refused?: (value: T) => boolean): Promise<T> {
    return this.#enqueue(work, bytes, refused, true);
  }

  #enqueue<T>(work: () => T, bytes: number, refused: ((value: T) => boolean) | undefined, oneStatement: boolean): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const entry: Queued = {
        work, bytes, scope: currentDurabilityScope(), refused: refused as ((value: unknown) => boolean) | undefined,
        oneStatement, resolve: resolve as (value: unknown) => void, reject,
      };
      if (this.#committing || this.#lockWait) this.#queued.push(entry);
      else this.#runNow(entry);
    });
  }

  /** Commits the open batch now; resolves when nothing this connection wrote is uncommitted. */
  async flush(): Promise<void> {
    while (this.#committing || this.#open || this.#lockWait || this.#syncing) {
      if (this.#committing) await this.#committing;
      else if (this.#open) this.#commit();
      else if (this.#syncing) await this.#syncing;
      else await new Promise((resolve) => setTimeout(resolve, 1));
    }
  }

  /**
   * Resolves once every write that ran on this connection so far is durable (committing the
   * open batch on its usual schedule); rejects when one of the writes still on their way never
   * will be. A batch that failed already is not seen here (its writers were told): a
   * deferred-durability scope waits on its batches' own handles instead (#begun).
   */
  async barrier(): Promise<void> {
    if (this.#failure) throw this.#failure;
    while (this.#committing) await this.#committing;
    const waiting = this.#open ? this.#batch : this.#unsynced.length > 0 ? this.#unsynced : this.#inSync;
    if (!waiting) return;
    return new Promise<void>((resolve, reject) => waiting.push({ ok: true, value: undefined, resolve: () => resolve(), reject }));
  }

  /**
   * Resolves once everything committed to the file so far is durable: by this connection, and
   * by the other threads of this process (./commit-counters.ts), whose syncs it waits for or
   * runs itself. Rejects once a sync has failed, since from then on nothing read from the file
   * is known to be on disk. Call it after a read, before acting on what it found.
   */
  async durable(): Promise<void> {
    if (this.#unsynced.length > 0) {
      await new Promise<void>((resolve, reject) => this.#unsynced.push({ ok: true, value: undefined, resolve: () => resolve(), reject }));
    } else if (this.#syncing) {
      await this.#syncing;
    }
    if (this.#failure) throw this.#failure;
    const counters = this.#counters;
    if (!counters) return;
    const seen = counters.begun;
    while (!counters.isSynced(seen)) {
      // A commit of another thread is still under way: its rows were not in the read, but it
      // is counted; a sync covers it only once it is done.
      if (counters.finished < seen) await new Promise((resolve) => setTimeout(resolve, 1));
      else await this.#syncForReaders(counters);
    }
  }

  /** The failed sync that stopped this connection's writes (readiness reports it), or null. */
  get failure(): Error | null {
    return this.#failure;
  }

  /**
   * Why writes on this connection fail now: the failed sync that stopped them, or the last
   * write that failed on the file itself (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY) or found
   * the write lock held past the busy timeout (SQLITE_BUSY), when no commit has succeeded since;
   * null when they do not. Its message names no file (/readyz shows it).
   */
  get writeFailure(): Error | null {
    return this.#failure ?? this.#writeFailure;
  }

  /**
   * False once a sync has failed, or once the database or its WAL is found deleted or replaced
   * (checked here too: two stats); while the last write failed (writeFailure), the answer
   * of a write of its own (the database header's user_version set to what it holds: one page
   * appended to the WAL, no data changed), which clears the failure when it commits. True
   * otherwise, without writing.
   */
  writable(): Promise<boolean> {
    if (!this.#failure) {
      const replaced = this.#replaced();
      if (replaced) this.#stop(replaced, []);
    }
    if (this.#failure) return Promise.resolve(false);
    if (!this.#writeFailure) return Promise.resolve(true);
    this.#probe ??= this.runStatement(() => {
      const { user_version: version } = this.#db.prepare('PRAGMA user_version').get() as { user_version: number };
      this.#db.exec(`PRAGMA user_version = ${Number(version)}`);
      this.#probedInBatch = true;
    }).then(() => this.#writeFailure === null, () => false).finally(() => (this.#probe = null));
    return this.#probe;
  }

  /** Closes the WAL file handle; call after flush(), before closing the connection. */
  dispose(): void {
    if (typeof this.#walFd === 'number') closeSync(this.#walFd);
    this.#walFd = undefined;
  }

  /**
   * The COMMITs this connection's other threads began on the file (./commit-counters.ts): the
   * file's other changes are another process's. Null without counters shared with the threads.
   */
  otherThreadsCommits(): bigint | null {
    return this.#counters ? this.#counters.begun - this.#commitsBegun : null;
  }

  /** Installs a commit hold on this connection (tests only: an option of the stores that write on it). */
  set hold(hold: CommitHold) {
    this.#hold = hold;
  }

  /** The number of the open batch (of the last one, between batches): it changes with every BEGIN. */
  get batch(): number {
    return this.#batchNumber;
  }

  /** True while a batch is open (for assertions in tests of the adapters). */
  get open(): boolean {
    return this.#open;
  }

  #runNow(entry: Queued): void {
    if (this.#failure) {
      entry.reject(this.#failure);
      return;
    }
    if (this.#inWork) {
      entry.reject(new Error('a group-commit write cannot start another one'));
      return;
    }
    if (!this.#open) {
      let begun: boolean;
      const seenRelease = this.#released?.version;
      try {
        begun = this.#tryBegin();
      } catch (error) {
        if (failsOnFile(error)) this.#writeFailure = this.#failingWrites(error);
        entry.reject(error);
        return;
      }
      if (!begun) {
        this.#queued.push(entry);
        this.#waitForLock(Date.now() + BUSY_TIMEOUT_MS, this.#lockRetryMs.first, seenRelease);
        return;
      }
      this.#begun();
    }
    let settled: Settled;
    // A scope that has settled meanwhile (its command answered without waiting for this write)
    // waits for nothing more: the write then settles once durable, as outside any scope.
    const scope = entry.scope?.open ? entry.scope : undefined;
    this.#inWork = true;
    try {
      if (!entry.oneStatement) this.#savepoint.run();
      try {
        const value = entry.work();
        if (!entry.oneStatement) this.#release.run();
        if (scope && !entry.refused?.(value)) {
          // The scope waits for this batch before its command answers: this batch, not the
          // connection, whose barrier would miss a batch that failed before the scope asked
          // (the command went on for a few turns after this write).
          scope.wrote(this.#batchDurable!);
          entry.resolve(value);
          settled = { ok: true, early: true, value, resolve: noop, reject: noop };
        } else {
          settled = { ok: true, value, resolve: entry.resolve, reject: entry.reject };
        }
      } catch (error) {
        // The statement's error ended the transaction (SQLite does so on a full disk, an I/O
        // error, out of memory, and rolls back all of it when a large row had spilled pages):
        // the batch's writes are gone, and so is the savepoint, whose ROLLBACK TO would fail
        // with "no such savepoint" in place of the error that says why.
        if (!this.#db.isTransaction) throw error;
        if (!entry.oneStatement) {
          this.#rollbackTo.run();
          this.#release.run();
        }
        settled = { ok: false, value: error, resolve: entry.resolve, reject: entry.reject };
      }
    } catch (error) {
      // The savepoint failed, or the transaction is gone (a full disk, an I/O error): the batch
      // can no longer be trusted. Its writes all fail with this error (#abort), which is
      // remembered when it is one of the file (writeFailure); the next write begins a new batch.
      this.#inWork = false;
      entry.reject(error);
      this.#abort(error);
      return;
    }
    this.#inWork = false;
    this.#batch.push(settled);
    this.#bytes += entry.bytes;
    if (this.#batch.length - 1 >= this.#maxWrites || this.#bytes >= this.#maxBytes) this.#commit();
  }

  /** A transaction has begun: the batch starts with a handle that settles with it, and commits when the turn ends. */
  #begun(): void {
    this.#open = true;
    this.#batchNumber++;
    this.#changesAtBegin = this.#writeFailure ? this.#totalChanges() : null;
    this.#probedInBatch = false;
    let settle!: Pick<Settled, 'resolve' | 'reject'>;
    const durable = new Promise<void>((resolve, reject) => (settle = { resolve: () => resolve(), reject }));
    durable.catch(() => {}); // a failure nobody waits for: each write of the batch hears of it
    this.#batchDurable = { barrier: () => durable };
    this.#batch.push({ ok: true, value: undefined, handle: true, ...settle });
    this.#scheduled = setImmediate(() => {
      this.#scheduled = null;
      this.#commit();
    });
  }

  #commit(): void {
    if (!this.#open || this.#committing) return;
    if (this.#scheduled) {
      clearImmediate(this.#scheduled);
      this.#scheduled = null;
    }
    const batch = this.#batch;
    this.#batch = [];
    this.#bytes = 0;
    const hold = this.#hold;
    if (hold) {
      this.#committing = hold({ file: this.#db.location(), writes: writesIn(batch), stage: 'commit' }).then(
        () => this.#finish(batch),
        (error) => this.#finish(batch, error),
      ).finally(() => {
        this.#committing = null;
        this.#runQueued();
      });
      return;
    }
    this.#finish(batch);
  }

  #runQueued(): void {
    const queued = this.#queued;
    this.#queued = [];
    for (const entry of queued) {
      if (this.#committing || this.#lockWait) this.#queued.push(entry);
      else this.#runNow(entry);
    }
  }

  /** BEGIN IMMEDIATE without waiting: false when another connection holds the write lock. */
  #tryBegin(): boolean {
    // Executed, not prepared once and re-run: SQLite applies `PRAGMA busy_timeout` while it
    // prepares the statement, so a re-run prepared one changes nothing, and BEGIN then slept
    // in the busy handler for the whole timeout.
    this.#db.exec('PRAGMA busy_timeout = 0');
    try {
      this.#db.exec('BEGIN IMMEDIATE');
      return true;
    } catch (error) {
      if ((error as { errcode?: number }).errcode === SQLITE_BUSY) return false;
      throw error;
    } finally {
      this.#db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    }
  }

  /** `seenRelease`: the release signal's version taken before the BEGIN that found the lock taken. */
  #waitForLock(deadline: number, delayMs: number, seenRelease: number | undefined): void {
    if (this.#lockWait) return;
    // Retried on a timer, or as soon as another thread of this process says it let the lock go
    // (without that, a thread waited up to 20 ms for a lock the other thread held for one turn).
    const released = this.#released;
    const stopListening = released?.addWaiter(() => {
      if (!this.#lockWait) return;
      clearTimeout(this.#lockWait);
      retry();
    });
    const retry = () => {
      stopListening?.();
      this.#lockWait = null;
      let begun = false;
      let failure: unknown = null;
      const seen = released?.version;
      try {
        begun = this.#tryBegin();
      } catch (error) {
        failure = error;
      }
      if (!begun && failure === null && Date.now() < deadline) {
        this.#waitForLock(deadline, Math.min(delayMs * 2, this.#lockRetryMs.max), seen);
        return;
      }
      if (!begun) {
        // Held past the busy timeout (or BEGIN failed otherwise): these writes fail, as a
        // blocking BEGIN would have after the same wait, and so would every other one while
        // the holder keeps it: remembered, as a write that failed on the file is.
        const queued = this.#queued;
        this.#queued = [];
        const error = failure ?? Object.assign(new Error('database is locked'), { errcode: SQLITE_BUSY, code: 'ERR_SQLITE_ERROR' });
        if (failure === null) this.#writeFailure = this.#lockHeld(deadline - BUSY_TIMEOUT_MS);
        else if (failsOnFile(failure)) this.#writeFailure = this.#failingWrites(failure);
        for (const entry of queued) entry.reject(error);
        return;
      }
      this.#begun();
      this.#runQueued();
    };
    // Let go between that BEGIN and the listening (the holder tells only threads that listen):
    // retried at once.
    this.#lockWait = setTimeout(retry, released && released.version !== seenRelease ? 0 : delayMs);
  }

  #finish(batch: Settled[], holdError?: unknown): void {
    let failure: unknown = holdError ?? this.#failure ?? undefined;
    if (failure === undefined) {
      this.#commitsBegun++;
      this.#counters?.begin();
      try {
        this.#db.exec('COMMIT');
      } catch (error) {
        failure = error;
      } finally {
        this.#counters?.finish();
      }
    }
    if (failure !== undefined && this.#db.isTransaction) {
      try {
        this.#db.exec('ROLLBACK');
      } catch {
        // The connection is unusable; every write of the batch fails below either way.
      }
    }
    this.#open = false;
    this.#released?.notify();
    if (failure === undefined) {
      // A write of the batch may have failed on the file by itself (its statement undone, the
      // transaction going on): the commit does not vouch for the file then.
      const failed = batch.find((entry) => !entry.ok && failsOnFile(entry.value));
      if (failed) this.#writeFailure = this.#failingWrites(failed.value);
      else if (this.#writeFailure && (this.#probedInBatch || this.#totalChanges() > (this.#changesAtBegin ?? Infinity))) this.#writeFailure = null;
    } else if (failsOnFile(failure)) {
      this.#writeFailure = this.#failingWrites(failure);
    }
    if (failure !== undefined) {
      for (const entry of batch) entry.reject(failure);
      if (batch.some((entry) => entry.early)) reportLostWrites(failure);
      return;
    }
    let fd: number | null;
    try {
      fd = this.#wal();
    } catch (error) {
      this.#stop(error as Error, batch);
      return;
    }
    if (fd === null) {
      settle(batch);
      return;
    }
    this.#unsynced.push(...batch);
    if (!this.#syncing) this.#sync(fd);
  }

  #sync(fd: number): void {
    const batch = this.#unsynced;
    this.#unsynced = [];
    const covers = this.#counters?.finished;
    this.#inSync = batch;
    this.#syncing = new Promise<void>((resolve) => {
      const done = (error: unknown) => {
        this.#syncing = null;
        this.#inSync = null;
        if (error) {
          this.#failed(error, batch);
          resolve();
          return;
        }
        // Synced, but to the files a start of Relay reads? (Once per batch, not per write.) A
        // failure found meanwhile (a ping's check, a readers' sync) fails the batch too.
        const replaced = this.#failure ?? this.#replaced();
        if (replaced) {
          this.#stop(replaced, batch);
          resolve();
          return;
        }
        if (covers !== undefined) this.#counters!.synced(covers);
        settle(batch);
        resolve();
        if (this.#unsynced.length > 0) this.#sync(fd);
      };
      this.#fdatasync(fd, writesIn(batch), done);
    });
  }

  /** fdatasync of the WAL, after the test hold if one is installed. */
  #fdatasync(fd: number, writes: number, done: (error: unknown) => void): void {
    const held = this.#hold?.({ file: this.#db.location(), writes, stage: 'sync' });
    if (held) held.then(() => fdatasync(fd, done), done);
    else fdatasync(fd, done);
  }

  /**
   * A failed fdatasync may have lost any page written since the last good one, and a later
   * sync that succeeds does not say otherwise (the kernel reports a failed write-back once,
   * then forgets it); a WAL with a lost frame loses every frame after it when SQLite recovers
   * it. So none of this batch's writes, nor of those committed behind it, is promised, and the
   * connection takes no more writes and vouches for no more reads: the rows stay readable, and
   * nothing may act on them. A restart recovers the file as the disk holds it.
   */
  #failed(error: unknown, batch: Settled[]): void {
    const reason = error instanceof Error ? error.message : String(error);
    // The file by its name only: the message is shown by /readyz, which names no path of the machine.
    this.#stop(Object.assign(new Error(`the write-ahead log of ${basename(this.#db.location() ?? 'the database')} could not be synced (${reason}): this process takes no more writes on it; restart it`, { cause: error }), { code: 'ERR_RELAY_WAL_SYNC' }), batch);
  }

  /** Stops the connection's writes for good (#failure), failing `batch` and every write committed behind it. */
  #stop(failure: Error, batch: Settled[]): void {
    this.#failure ??= failure;
    const lost = [...batch, ...this.#unsynced];
    this.#unsynced = [];
    settle(lost, this.#failure);
    if (lost.some((entry) => entry.early)) reportLostWrites(this.#failure);
  }

  /** Rows this connection has changed since it opened (cheap: a counter of the connection). */
  #totalChanges(): number {
    return Number((this.#db.prepare('SELECT total_changes() AS n').get() as { n: number | bigint }).n);
  }

  #failingWrites(error: unknown): Error {
    const reason = error instanceof Error ? error.message : String(error);
    // No file path: /readyz, which anyone who reaches the API may read, shows this.
    return Object.assign(new Error(`writes to the database file fail (${reason}): the last one failed and none has succeeded since`, { cause: error }), { code: 'ERR_RELAY_WRITES_FAILING' });
  }

  /**
   * Writes found the lock held from `since` on, past the busy timeout. The first such wait
   * dates it: later ones that fail too keep that date, so the reason says how long it lasts.
   */
  #lockHeld(since: number): Error {
    const known = this.#writeFailure as (Error & { code?: string }) | null;
    if (known?.code === 'ERR_RELAY_WRITE_LOCK_HELD') return known;
    // No file path: /readyz shows this.
    return Object.assign(new Error(
      `writes to the database file fail: its write lock has been held by another connection since ${new Date(since).toISOString()}, past the ${BUSY_TIMEOUT_MS / 1000} s busy timeout (a sqlite3 shell or a backup tool in a transaction, or a hung process)`,
    ), { code: 'ERR_RELAY_WRITE_LOCK_HELD', errcode: SQLITE_BUSY });
  }

  /** One sync of the WAL at a time for readers: fdatasync covers the file, whoever wrote it. */
  #syncForReaders(counters: CommitCounters): Promise<void> {
    this.#readersSync ??= new Promise<void>((resolve, reject) => {
      let fd: number | null;
      try {
        fd = this.#wal();
      } catch (error) {
        this.#stop(error as Error, []);
        reject(this.#failure);
        return;
      }
      const covers = counters.finished;
      if (fd === null) {
        // No WAL: each COMMIT synced its own writes.
        counters.synced(covers);
        resolve();
        return;
      }
      const done = (error: unknown) => {
        const replaced = error ? null : this.#replaced();
        if (error) {
          this.#failed(error, []);
          reject(this.#failure);
        } else if (replaced) {
          this.#stop(replaced, []);
          reject(this.#failure);
        } else {
          counters.synced(covers);
          resolve();
        }
      };
      this.#fdatasync(fd, 0, done);
    }).finally(() => (this.#readersSync = null));
    return this.#readersSync;
  }

  /**
   * The WAL's descriptor, opened (and fstat'd) the first time; null without a WAL. Throws when
   * the database is in WAL mode and its WAL is missing: deleted since a connection opened it.
   */
  #wal(): number | null {
    if (this.#walFd === undefined) {
      const file = this.#db.location();
      let fd: number | null = null;
      try {
        fd = file ? openSync(`${file}-wal`, 'r') : null;
      } catch (error) {
        // Not in WAL mode: COMMIT did its own syncing (or there is nothing to sync). In WAL mode
        // the WAL exists as long as a connection is open (this one just committed to it).
        if ((error as NodeJS.ErrnoException).code === 'ENOENT' && this.#inWalMode()) throw replacedFile(`${file}-wal`);
      }
      if (fd !== null) {
        try {
          const stats = fstatSync(fd, { bigint: true });
          this.#walIdentity = { dev: stats.dev, ino: stats.ino };
        } catch {
          // Unknown: the WAL is synced all the same, only not compared with its path.
        }
      }
      this.#walFd = fd;
    }
    return this.#walFd;
  }

  #inWalMode(): boolean {
    try {
      return (this.#db.prepare('PRAGMA journal_mode').get() as { journal_mode: string }).journal_mode === 'wal';
    } catch {
      return false;
    }
  }

  /**
   * The failure to report when the WAL this connection synced, or the database file it opened,
   * is no longer the file at its path (deleted, or another file moved there); null when both
   * still are, or when that cannot be told. Two stats, no fstat: a descriptor's file never changes,
   * and a file held open keeps its inode number, so the path naming the same device and inode
   * means the same file, still linked there.
   */
  #replaced(): Error | null {
    const file = this.#db.location();
    if (!file) return null;
    if (this.#walIdentity && !stillAt(`${file}-wal`, this.#walIdentity)) return replacedFile(`${file}-wal`);
    const database = openedFile(this.#db);
    if (database && !stillAt(file, database)) return replacedFile(file);
    return null;
  }

  #abort(error: unknown): void {
    const batch = this.#batch;
    this.#batch = [];
    this.#bytes = 0;
    if (this.#scheduled) {
      clearImmediate(this.#scheduled);
      this.#scheduled = null;
    }
    this.#finish(batch, error);
  }
}

const SQLITE_BUSY = 5;

/** Primary result codes of a file that cannot be written: read-only, I/O error, full. */
const FILE_FAILURES = new Set([8, 10, 13]);
/** A write that failed on the file itself, not on what it wrote (a conflict, a constraint). */
const failsOnFile = (error: unknown) => {
  const code = (error as { errcode?: unknown } | null)?.errcode;
  return typeof code === 'number' && FILE_FAILURES.has(code & 0xff);
};

/** Whether `path` still names the file `identity` is; true when that cannot be told (stat failed otherwise than ENOENT). */
function stillAt(path: string, identity: FileIdentity): boolean {
  try {
    return sameFile(identity, identityAt(path));
  } catch {
    return true;
  }
}

function replacedFile(path: string): Error {
  // The file by its name only: /readyz shows this.
  return Object.assign(new Error(
    `${basename(path)} was deleted or replaced while Relay ran: what this process writes to it is in no file a start of Relay reads, so it takes no more writes on it; restart it`,
  ), { code: 'ERR_RELAY_FILE_REPLACED' });
}

const noop = () => {};
const writesIn = (batch: Settled[]) => batch.filter((entry) => !entry.handle).length;

function settle(batch: Settled[], failure?: unknown): void {
  for (const entry of batch) {
    if (failure !== undefined) entry.reject(failure);
    else if (entry.ok) entry.resolve(entry.value);
    else entry.reject(entry.value);
  }
}

const byConnection = new WeakMap<DatabaseSync, GroupCommit>();

/** The group commit of a connection: one per connection, shared by every adapter writing on it. */
export function commitsFor(db: DatabaseSync): GroupCommit {
  let commits = byConnection.get(db);
  if (!commits) {
    commits = new GroupCommit(db);
    byConnection.set(db, commits);
  }
  return commits;
}
