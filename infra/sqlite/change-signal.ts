// In-process wake-ups for the sqlite adapters: a writer bumps a signal after commit so
// readers of the same database file in this process react at once instead of at their next
// poll. Once wakeOtherThreads() was called, the threads of this process that called it wake
// each other too (`relay start` with RELAY_PIPELINE_THREAD=on runs the pipeline on a thread of
// its own). Other processes sharing the file are only seen by polling.
import { BroadcastChannel } from 'node:worker_threads';
import type { DatabaseSync } from 'node:sqlite';
import { currentDurabilityScope, type DurabilityBarrier } from '../ports/durability.ts';

export class ChangeSignal {
  #version = 0;
  readonly #waiters = new Set<() => void>();
  #otherThreads: BroadcastChannel | null = null;
  #posting: NodeJS.Immediate | null = null;

  /** Take it before reading; pass it to wait() so a change made in between is not missed. */
  get version(): number {
    return this.#version;
  }

  notify(): void {
    this.#wake();
    // One message per turn of the loop, posted after every notify of the turn: a reader woken
    // by it then finds all of the turn's commits.
    if (this.#otherThreads && !this.#posting) {
      this.#posting = setImmediate(() => {
        this.#posting = null;
        this.#otherThreads?.postMessage(0);
      });
    }
  }

  /** @internal Shares this signal with the other threads' signals of the same name. */
  shareAs(name: string): void {
    if (this.#otherThreads) return;
    const channel = new BroadcastChannel(name);
    channel.onmessage = () => this.#wake();
    // Wake-ups never keep a thread alive on their own.
    (channel as unknown as { unref(): void }).unref();
    this.#otherThreads = channel;
  }

  #wake(): void {
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

// Keyed by the database file so two connections to one file in this process wake each other.
const byFile = new Map<string, Map<string, ChangeSignal>>();
// In-memory databases have no file; each connection is its own database.
const byConnection = new WeakMap<DatabaseSync, Map<string, ChangeSignal>>();

let otherThreads = false;

/**
 * From now on, the file-backed signals of this thread also wake (and are woken by) the same
 * signals of every other thread of the process that called it. Call it before opening stores.
 */
export function wakeOtherThreads(): void {
  otherThreads = true;
  for (const [file, channels] of byFile) for (const [channel, signal] of channels) signal.shareAs(sharedName(file, channel));
}

// Node cuts a BroadcastChannel's name at its first NUL, and the channels' names hold some
// (log-group\u0000<group>\u0000<topic>): encoded, every signal keeps a channel of its own.
const sharedName = (file: string, channel: string) => `relay-sqlite:${encodeURIComponent(file)}:${encodeURIComponent(channel)}`;

export function changeSignal(db: DatabaseSync, channel: string): ChangeSignal {
  const file = db.location();
  let channels = file ? byFile.get(file) : byConnection.get(db);
  if (!channels) {
    channels = new Map();
    if (file) byFile.set(file, channels);
    else byConnection.set(db, channels);
  }
  let signal = channels.get(channel);
  if (!signal) {
    signal = new ChangeSignal();
    channels.set(channel, signal);
    if (otherThreads && file) signal.shareAs(sharedName(file, channel));
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
