// What the threads of this process know of a database file's commits and syncs, in memory they
// share. A thread reads rows that another thread's group commit made visible at COMMIT, before
// that thread's sync of the WAL has made them durable, and it cannot see the other group
// commit's state: these counters let it tell, and wait (./group-commit.ts, durable()).
//
// Three counts per file, each only ever growing:
// - begun: counted just before a COMMIT, so a row a reader sees is counted by the time the
//   reader looks after its read;
// - finished: counted once the COMMIT has returned (a little late, never early). The write lock
//   orders the commits, so `finished` counts a prefix of them, and a sync that starts after
//   reading it covers at least that many;
// - synced: the highest `finished` read before a sync that then succeeded.
// A read made when `begun` was n rests on durable rows once `synced` reaches n.
//
// Other processes sharing the file are not counted: what the counts leave of a file's changes is
// theirs, which is how ./change-signal.ts tells their commits from this process's threads'.
import { createHash } from 'node:crypto';
import { getEnvironmentData, isMainThread, setEnvironmentData } from 'node:worker_threads';

const SLOTS = 1024;
const COUNTS = 3;
const KEY = 'relay:sqlite-commit-counters';

interface SharedMemory {
  keys: SharedArrayBuffer;
  counts: SharedArrayBuffer;
}

/**
 * Made by the main thread when this module loads, before the adapters open a file or start a
 * thread; threads inherit it (environment data). A thread started without it has none.
 */
function sharedMemory(): { keys: BigInt64Array; counts: BigInt64Array } | null {
  let shared = getEnvironmentData(KEY) as SharedMemory | undefined;
  if (!shared && isMainThread) {
    shared = { keys: new SharedArrayBuffer(8 * SLOTS), counts: new SharedArrayBuffer(8 * COUNTS * SLOTS) };
    setEnvironmentData(KEY, shared);
  }
  return shared ? { keys: new BigInt64Array(shared.keys), counts: new BigInt64Array(shared.counts) } : null;
}

const memory = sharedMemory();

export class CommitCounters {
  readonly #counts: BigInt64Array;
  readonly #at: number;

  private constructor(counts: BigInt64Array, at: number) {
    this.#counts = counts;
    this.#at = at;
  }

  /** The file's counters, claimed on first use by whichever thread gets there first; null without shared memory or a free slot. */
  static of(file: string): CommitCounters | null {
    if (!memory) return null;
    const digest = createHash('sha256').update(file).digest();
    const key = digest.readBigInt64LE(0) || 1n;
    const first = digest.readUInt32LE(8) % SLOTS;
    for (let probe = 0; probe < SLOTS; probe++) {
      const slot = (first + probe) % SLOTS;
      const held = Atomics.compareExchange(memory.keys, slot, 0n, key);
      if (held === 0n || held === key) return new CommitCounters(memory.counts, slot * COUNTS);
    }
    return null;
  }

  /** Before a COMMIT. */
  begin(): void {
    Atomics.add(this.#counts, this.#at, 1n);
  }

  /** After a COMMIT returned, whether it succeeded or not. */
  finish(): void {
    Atomics.add(this.#counts, this.#at + 1, 1n);
  }

  /** After a read: the commits whose rows it may have seen. */
  get begun(): bigint {
    return Atomics.load(this.#counts, this.#at);
  }

  /** Before a sync starts: the commits it will cover. */
  get finished(): bigint {
    return Atomics.load(this.#counts, this.#at + 1);
  }

  /** A sync that started when `finished` was `upTo` succeeded. */
  synced(upTo: bigint): void {
    for (;;) {
      const known = Atomics.load(this.#counts, this.#at + 2);
      if (known >= upTo || Atomics.compareExchange(this.#counts, this.#at + 2, known, upTo) === known) return;
    }
  }

  isSynced(upTo: bigint): boolean {
    return Atomics.load(this.#counts, this.#at + 2) >= upTo;
  }
}
