// In-process wake-ups for the sqlite adapters: a writer bumps a signal after commit so
// readers of the same database file in this process react at once instead of at their next
// poll. Once wakeOtherThreads() was called, the threads of this process that called it wake
// each other too (`relay start` with RELAY_PIPELINE_THREAD=on runs the pipeline on a thread of
// its own), through one BroadcastChannel per file per thread: at the end of a turn in which
// signals of a file moved, one message names them all. A message wakes the receiving thread,
// which on a VM costs more than anything in it, so it names only the signals another thread
// waits on; the others' changes are seen through shared memory (WakeTable). Other processes
// sharing the file are only seen by polling.
import { createHash } from 'node:crypto';
import { BroadcastChannel, getEnvironmentData, isMainThread, setEnvironmentData } from 'node:worker_threads';
import type { DatabaseSync } from 'node:sqlite';
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
  #otherThreads: { channel: FileChannel; name: string; table: WakeTable | null; slot: number } | null = null;
  /** Whether this thread is marked in the table as waiting on this signal. */
  #marked = false;

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
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    this.#mark();
    for (const wake of waiters) wake();
  }

  /** @internal */
  addWaiter(wake: () => void): () => void {
    this.#waiters.add(wake);
    this.#mark();
    return () => {
      this.#waiters.delete(wake);
      this.#mark();
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

// Keyed by the database file so two connections to one file in this process wake each other.
const byFile = new Map<string, Map<string, ChangeSignal>>();
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
  for (const [file, signals] of byFile) for (const [name, signal] of signals) signal.shareAs(channelOf(file, signals), name, table);
}

function channelOf(file: string, signals: Map<string, ChangeSignal>): FileChannel {
  let channel = channels.get(file);
  if (!channel) channels.set(file, (channel = new FileChannel(file, signals)));
  return channel;
}

export function changeSignal(db: DatabaseSync, channel: string): ChangeSignal {
  const file = db.location();
  let signals = file ? byFile.get(file) : byConnection.get(db);
  if (!signals) {
    signals = new Map();
    if (file) byFile.set(file, signals);
    else byConnection.set(db, signals);
  }
  let signal = signals.get(channel);
  if (!signal) {
    signal = new ChangeSignal();
    signals.set(channel, signal);
    if (otherThreads && file) signal.shareAs(channelOf(file, signals), channel, table);
  }
  return signal;
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
