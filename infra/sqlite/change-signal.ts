// In-process wake-ups for the sqlite adapters: a writer bumps a signal after commit so
// readers of the same database file in this process react at once instead of at their next
// poll. Once wakeOtherThreads() was called, the threads of this process that called it wake
// each other too (`relay start` with RELAY_PIPELINE_THREAD=on runs the pipeline on a thread of
// its own), through one BroadcastChannel per file per thread: at the end of a turn in which
// signals of a file moved, one message names them all (each message wakes the receiving
// thread, which on a VM costs more than anything in it). Other processes sharing the file are
// only seen by polling.
import { BroadcastChannel } from 'node:worker_threads';
import type { DatabaseSync } from 'node:sqlite';
import { currentDurabilityScope, type DurabilityBarrier } from '../ports/durability.ts';

export class ChangeSignal {
  #version = 0;
  readonly #waiters = new Set<() => void>();
  #otherThreads: { channel: FileChannel; name: string } | null = null;

  /** Take it before reading; pass it to wait() so a change made in between is not missed. */
  get version(): number {
    return this.#version;
  }

  notify(): void {
    this.wake();
    if (this.#otherThreads) this.#otherThreads.channel.moved(this.#otherThreads.name);
  }

  /** @internal Shares this signal with the other threads' signals of the same name and file. */
  shareAs(channel: FileChannel, name: string): void {
    this.#otherThreads ??= { channel, name };
  }

  /** @internal Wakes this thread's readers only. */
  wake(): void {
    this.#version++;
    const waiters = [...this.#waiters];
    this.#waiters.clear();
    for (const wake of waiters) wake();
  }

  /** @internal */
  addWaiter(wake: () => void): () => void {
    this.#waiters.add(wake);
    return () => this.#waiters.delete(wake);
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
  });
}

/**
 * A file's signals, shared with the other threads: the names of those that moved in this turn
 * of the loop go out in one message at its end, after every notify of the turn, so that a
 * reader woken by it finds all of the turn's commits.
 */
class FileChannel {
  readonly #channel: BroadcastChannel;
  readonly #moved = new Set<string>();
  #posting: NodeJS.Immediate | null = null;

  constructor(file: string, signals: Map<string, ChangeSignal>) {
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
      const names = [...this.#moved];
      this.#moved.clear();
      this.#channel.postMessage(names);
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

/**
 * From now on, the file-backed signals of this thread also wake (and are woken by) the same
 * signals of every other thread of the process that called it. Call it before opening stores.
 */
export function wakeOtherThreads(): void {
  otherThreads = true;
  for (const [file, signals] of byFile) for (const [name, signal] of signals) signal.shareAs(channelOf(file, signals), name);
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
    if (otherThreads && file) signal.shareAs(channelOf(file, signals), channel);
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
