// Wake-ups for the sqlite adapters: a writer bumps a signal after commit so readers of the same
// database file react at once instead of at their next poll. In this process that is a call;
// once wakeOtherThreads() was called, the threads of this process that called it wake each other
// too (`relay start` with RELAY_PIPELINE_THREAD=on runs the pipeline on a thread of its own),
// through one BroadcastChannel per file per thread: at the end of a turn in which signals of a
// file moved, one message names them all. A message wakes the receiving thread, which on a VM
// costs more than anything in it, so it names only the signals another thread waits on; the
// others' changes are seen through shared memory (WakeTable).
//
// Other processes sharing the file (`relay api` in one, `relay processor sender` in another) cannot
// be called, so each thread looks for their commits itself (OtherProcesses): while one of its
// readers waits on a file, it reads `PRAGMA data_version` on its writer connection every
// WATCH_INTERVAL_MS. That value moves when a connection other than the writer commits, never for
// the writer's own commits, which wake their readers already; commits of this process's other
// threads are told apart by their commit counts (./commit-counters.ts). A commit of another
// process wakes every waiting reader of the file in this thread, without moving any signal's
// version (nothing tells which tables changed, and a moved group signal would make each consumer
// rebalance): each reader looks once, as at its poll, at most once a WATCH_INTERVAL_MS however
// busy the other process is. The readers' poll stays, for what this misses: a commit of another
// process in the same interval as one of another thread of this process (whose wake-up reaches
// only the readers of the signals it moved), and files opened on a borrowed connection.
import { createHash } from 'node:crypto';
import { BroadcastChannel, getEnvironmentData, isMainThread, setEnvironmentData } from 'node:worker_threads';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { currentDurabilityScope, type DurabilityBarrier } from '../ports/durability.ts';

/**
 * Memory the threads of a process share, one slot per signal (file and name): how often the
 * signal moved on any thread, and per thread whether it waits on it. A writer bumps the count,
 * then posts only if another thread waits; a reader marks itself waiting, then looks at the
 * count again before it sleeps. Both in that order (sequentially consistent atomics), a change
 * is never missed: either the writer sees the waiter or the reader sees the change.
 *
 * A slot belongs to one signal only (its key: 64 bits of a SHA-256 of file and name, claimed by
 * compare-and-swap): readers compare versions to tell which signal moved (a consumer rebalances
 * when the group's members signal moves), so a slot shared by two signals would make one look
 * as busy as the other.
 */
class WakeTable {
  static readonly #SLOTS = 4096;
  /** Threads with a column of their own; any further thread shares the last, which every writer treats as waiting elsewhere. */
  static readonly #THREADS = 8;
  static readonly #STRIDE = WakeTable.#THREADS + 2;
  static readonly #KEY = 'relay:sqlite-wake-table';

  readonly #keys: BigInt64Array;
  readonly #cells: Int32Array;
  readonly #me: number;

  private constructor(keys: BigInt64Array, cells: Int32Array) {
    this.#keys = keys;
    this.#cells = cells;
    const index = Atomics.add(cells, 0, 1);
    this.#me = Math.min(index, WakeTable.#THREADS);
  }

  /**
   * The process's table: made by the main thread and inherited by the threads it starts after
   * that (environment data). A thread that finds none has no table: it tells others of every
   * change and learns of theirs only by message, as before tables existed.
   */
  static ofThisThread(): WakeTable | null {
    let shared = getEnvironmentData(WakeTable.#KEY) as { keys: SharedArrayBuffer; cells: SharedArrayBuffer } | undefined;
    if (!shared) {
      if (!isMainThread) return null;
      shared = {
        keys: new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT * WakeTable.#SLOTS),
        cells: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT * (1 + WakeTable.#SLOTS * WakeTable.#STRIDE)),
      };
      setEnvironmentData(WakeTable.#KEY, shared);
    }
    return new WakeTable(new BigInt64Array(shared.keys), new Int32Array(shared.cells));
  }

  /** The signal's slot, claimed on first use by whichever thread gets there first; null when the table is full. */
  slotOf(file: string, name: string): number | null {
    const digest = createHash('sha256').update(file).update('\u0000').update(name).digest();
    const key = digest.readBigInt64LE(0) || 1n;
    const first = digest.readUInt32LE(8) % WakeTable.#SLOTS;
    for (let probe = 0; probe < WakeTable.#SLOTS; probe++) {
      const index = (first + probe) % WakeTable.#SLOTS;
      const held = Atomics.compareExchange(this.#keys, index, 0n, key);
      if (held === 0n || held === key) return 1 + index * WakeTable.#STRIDE;
    }
    return null;
  }

  moves(slot: number): number {
    return Atomics.load(this.#cells, slot);
  }

  moved(slot: number): void {
    Atomics.add(this.#cells, slot, 1);
  }

  waiting(slot: number, waits: boolean): void {
    Atomics.add(this.#cells, slot + 1 + this.#me, waits ? 1 : -1);
  }

  /** Whether a thread other than this one waits on the slot's signal. */
  othersWait(slot: number): boolean {
    for (let column = 0; column <= WakeTable.#THREADS; column++) {
      if (column === this.#me && column < WakeTable.#THREADS) continue;
      if (Atomics.load(this.#cells, slot + 1 + column) > 0) return true;
    }
    return false;
  }
}

export class ChangeSignal {
  #version = 0;
  readonly #waiters = new Set<() => void>();
  /** The file's signals of this thread, which count whether any of them has waiters; null in memory. */
  readonly #file: FileSignals | null;
  #otherThreads: { channel: FileChannel; name: string; table: WakeTable | null; slot: number } | null = null;
  /** Whether this thread is marked in the table as waiting on this signal. */
  #marked = false;

  /** @internal Made by changeSignal(). */
  constructor(file: FileSignals | null = null) {
    this.#file = file;
  }

  /** Take it before reading; pass it to wait() so a change made in between is not missed. */
  get version(): number {
    const shared = this.#otherThreads;
    return shared?.table ? this.#version + shared.table.moves(shared.slot) : this.#version;
  }

  notify(): void {
    this.wake();
    const shared = this.#otherThreads;
    if (!shared) return;
    shared.table?.moved(shared.slot);
    shared.channel.moved(shared.name);
  }

  /** @internal Shares this signal with the other threads' signals of the same name and file. */
  shareAs(channel: FileChannel, name: string, table: WakeTable | null): void {
    if (this.#otherThreads) return;
    const slot = table?.slotOf(channel.file, name) ?? null;
    this.#otherThreads = slot === null ? { channel, name, table: null, slot: 0 } : { channel, name, table, slot };
    this.#mark();
  }

  /** @internal Whether another thread waits on this signal (always, without a table). */
  get othersWait(): boolean {
    const shared = this.#otherThreads;
    return !shared?.table || shared.table.othersWait(shared.slot);
  }

  /** @internal Wakes this thread's readers only. */
  wake(): void {
    this.#version++;
    this.wakeWaiters();
  }

  /** @internal Wakes this thread's readers to look again, though the signal did not move (another process committed). */
  wakeWaiters(): void {
    if (this.#waiters.size === 0) return;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    this.#mark();
    this.#file?.waiting(-1);
    for (const wake of waiters) wake();
  }

  /** @internal */
  addWaiter(wake: () => void): () => void {
    this.#waiters.add(wake);
    this.#mark();
    if (this.#waiters.size === 1) this.#file?.waiting(1);
    return () => {
      if (!this.#waiters.delete(wake)) return;
      this.#mark();
      if (this.#waiters.size === 0) this.#file?.waiting(-1);
    };
  }

  /** Keeps the table's mark of this thread in step with whether it has waiters. */
  #mark(): void {
    const table = this.#otherThreads?.table;
    const waits = this.#waiters.size > 0;
    if (!table || waits === this.#marked) return;
    this.#marked = waits;
    table.waiting(this.#otherThreads!.slot, waits);
  }
}

export interface SeenSignal {
  signal: ChangeSignal;
  version: number;
}

/** Resolves when any signal moved past its seen version, after `ms`, or when `abort` fires. */
export function waitForChange(seen: SeenSignal[], ms: number, abort?: AbortSignal): Promise<void> {
  if (abort?.aborted || seen.some((s) => s.signal.version !== s.version)) return Promise.resolve();
  return new Promise((resolve) => {
    const removers: Array<() => void> = [];
    const done = () => {
      clearTimeout(timer);
      for (const remove of removers) remove();
      abort?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    for (const s of seen) removers.push(s.signal.addWaiter(done));
    abort?.addEventListener('abort', done, { once: true });
    // Now marked as waiting: a change another thread made before that sent no message.
    if (seen.some((s) => s.signal.version !== s.version)) done();
  });
}

/**
 * A file's signals, shared with the other threads: the names of those that moved in this turn
 * of the loop go out in one message at its end, after every notify of the turn, so that a
 * reader woken by it finds all of the turn's commits.
 */
class FileChannel {
  readonly file: string;
  readonly #channel: BroadcastChannel;
  readonly #signals: Map<string, ChangeSignal>;
  readonly #moved = new Set<string>();
  #posting: NodeJS.Immediate | null = null;

  constructor(file: string, signals: Map<string, ChangeSignal>) {
    this.file = file;
    this.#signals = signals;
    // Node cuts a BroadcastChannel's name at its first NUL: the file's name is encoded, and the
    // signals' names (log-group\u0000<group>\u0000<topic>) travel in the messages.
    this.#channel = new BroadcastChannel(`relay-sqlite:${encodeURIComponent(file)}`);
    this.#channel.onmessage = (event) => {
      for (const name of (event as { data: string[] }).data) signals.get(name)?.wake();
    };
    // Wake-ups never keep a thread alive on their own.
    (this.#channel as unknown as { unref(): void }).unref();
  }

  moved(name: string): void {
    this.#moved.add(name);
    this.#posting ??= setImmediate(() => {
      this.#posting = null;
      const names = [...this.#moved].filter((name) => this.#signals.get(name)?.othersWait !== false);
      this.#moved.clear();
      if (names.length > 0) this.#channel.postMessage(names);
    });
  }
}

/**
 * How often a file is looked at for other processes' commits while a reader of this thread waits
 * on it. A look costs about 35 µs on a VM, nearly all of it the event loop's wake-up (the pragma
 * takes 1 µs): 10 ms is ~0.3 % of a core for an idle process whose consumers wait, and ~5 ms
 * on average between another process's commit and its readers here.
 */
const WATCH_INTERVAL_MS = 10;

/** A file's signals in this thread, and whether any of them has a waiter (which OtherProcesses looks out for). */
class FileSignals {
  readonly signals = new Map<string, ChangeSignal>();
  #waiting = 0;
  watch: OtherProcesses | null = null;

  get anyWaiting(): boolean {
    return this.#waiting > 0;
  }

  /** A signal got its first waiter (1) or lost its last one (-1). */
  waiting(change: 1 | -1): void {
    this.#waiting += change;
    if (this.#waiting === 1 && change === 1) this.watch?.start();
  }

  wakeWaiters(): void {
    for (const signal of this.signals.values()) signal.wakeWaiters();
  }
}

/**
 * Looks for commits of other processes to one file while this thread has readers waiting on it,
 * on the writer connection of this thread (see the header). The timer stops while nobody waits,
 * but the data_version last seen stays: a reader that read just before a commit and then waited
 * is woken by it; one that read just after it looks once more, which is cheaper than missing it.
 */
class OtherProcesses {
  readonly #file: FileSignals;
  readonly #dataVersion: StatementSync;
  readonly #otherThreadsCommits: () => bigint;
  #version: unknown;
  #otherThreads: bigint;
  #timer: NodeJS.Timeout | null = null;
  #closed = false;

  constructor(file: FileSignals, writer: DatabaseSync, otherThreadsCommits: () => bigint) {
    this.#file = file;
    this.#dataVersion = writer.prepare('PRAGMA data_version');
    this.#otherThreadsCommits = otherThreadsCommits;
    this.#otherThreads = otherThreadsCommits();
    this.#version = this.#dataVersion.get()?.data_version;
    if (file.anyWaiting) this.start();
  }

  start(): void {
    if (this.#timer || this.#closed) return;
    this.#timer = setInterval(() => this.#look(), WATCH_INTERVAL_MS);
    // Whether the process stays up is for its servers and the readers' polls to decide.
    this.#timer.unref();
  }

  #look(): void {
    if (!this.#file.anyWaiting) {
      this.#stop();
      return;
    }
    let version: unknown;
    let otherThreads: bigint;
    try {
      // Read before data_version: another thread's commit in between reads as another
      // process's, a wake-up too many, never one too few.
      otherThreads = this.#otherThreadsCommits();
      version = this.#dataVersion.get()?.data_version;
    } catch {
      // A failing file is the readers' to report, at their poll.
      return;
    }
    const moved = version !== this.#version;
    const byOtherThreads = otherThreads !== this.#otherThreads;
    this.#version = version;
    this.#otherThreads = otherThreads;
    if (moved && !byOtherThreads) this.#file.wakeWaiters();
  }

  #stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  close(): void {
    this.#closed = true;
    this.#stop();
    if (this.#file.watch === this) this.#file.watch = null;
  }
}

// Keyed by the database file so two connections to one file in this process wake each other.
const byFile = new Map<string, FileSignals>();
// In-memory databases have no file; each connection is its own database.
const byConnection = new WeakMap<DatabaseSync, Map<string, ChangeSignal>>();
// Once wakeOtherThreads() was called: each file's channel to the other threads.
const channels = new Map<string, FileChannel>();

let otherThreads = false;
let table: WakeTable | null = null;

/**
 * From now on, the file-backed signals of this thread also wake (and are woken by) the same
 * signals of every other thread of the process that called it. Call it before opening stores,
 * and on the main thread before starting the threads (they inherit its WakeTable).
 */
export function wakeOtherThreads(): void {
  if (!otherThreads) table = WakeTable.ofThisThread();
  otherThreads = true;
  for (const [file, { signals }] of byFile) for (const [name, signal] of signals) signal.shareAs(channelOf(file, signals), name, table);
}

function channelOf(file: string, signals: Map<string, ChangeSignal>): FileChannel {
  let channel = channels.get(file);
  if (!channel) channels.set(file, (channel = new FileChannel(file, signals)));
  return channel;
}

function fileSignals(file: string): FileSignals {
  let signals = byFile.get(file);
  if (!signals) byFile.set(file, (signals = new FileSignals()));
  return signals;
}

export function changeSignal(db: DatabaseSync, channel: string): ChangeSignal {
  const file = db.location();
  const perFile = file ? fileSignals(file) : null;
  let signals = perFile ? perFile.signals : byConnection.get(db);
  if (!signals) byConnection.set(db, (signals = new Map()));
  let signal = signals.get(channel);
  if (!signal) {
    signal = new ChangeSignal(perFile);
    signals.set(channel, signal);
    if (otherThreads && file) signal.shareAs(channelOf(file, signals), channel, table);
  }
  return signal;
}

/**
 * Wakes this thread's readers of the writer's file when another process commits to it, until
 * the returned function is called (before the writer closes). `otherThreadsCommits`: the
 * commits this process's other threads began on the file (they wake their readers themselves).
 */
export function watchOtherProcesses(writer: DatabaseSync, otherThreadsCommits: () => bigint): () => void {
  const file = writer.location();
  if (!file) return () => {};
  const signals = fileSignals(file);
  signals.watch?.close();
  const watch = new OtherProcesses(signals, writer, otherThreadsCommits);
  signals.watch = watch;
  return () => watch.close();
}

/**
 * Wakes the signal's readers after a write. Inside a deferred-durability scope the write was
 * given before its batch committed, and readers (another connection) would not see it yet: a
 * wake-up then would find nothing, and the next would only come at the readers' poll (150 ms
 * later for an event-store subscription). So there the readers are woken once it is durable.
 */
export function notifyOnceCommitted(commits: DurabilityBarrier, signal: ChangeSignal): void {
  if (!currentDurabilityScope()) {
    signal.notify();
    return;
  }
  const wake = () => signal.notify();
  commits.barrier().then(wake, wake);
}
