// Management documents that every send reads (its API key, its workspace, its sender domain)
// change rarely, and reading them is most of a send's store round trips: a read is reused for
// REUSE_MS. A change made through this process's management services is seen at once (they
// call managementChanged()); a change made by another process (the CLI, another API process) is
// seen within REUSE_MS.
import type { DocumentStore } from '../../../infra/ports/document-store.ts';

/** How long a read is reused: the bound on how late a change made by another process is seen. */
export const REUSE_MS = 250;
/** Reads remembered per kind and store at most: the kind's reads are forgotten when full. */
const LIMIT = 10_000;

/** Moved by every management change in this process, whatever store it went through. */
let changes = 0;

/** Every read reused so far is read again: call once a management document changed (or may have). */
export function managementChanged(): void {
  changes++;
}

interface Reused<V> { value: V; until: number; changes: number }

/**
 * One kind of read (e.g. workspaces by id), reused by key. Entries past their REUSE_MS go within
 * a quarter of it: a key may be as long as a send's recipient domains joined (12 KB), so what an
 * idle process holds must not be what its last 10,000 sends read.
 */
export class ReusedReads<V> {
  /** In the order they were last set: about the earliest deadlines first. */
  readonly #entries = new Map<string, Reused<V>>();
  #sweep: NodeJS.Timeout | null = null;

  /**
   * The value `read` gives for `key`, reused when read within REUSE_MS and no change was made in
   * this process since. `keep` says whether a value may be reused (e.g. not a revoked key).
   * Deadlines are on a monotonic clock: tests that move `now` move no deadline.
   */
  async get(key: string, read: () => Promise<V>, keep: (value: V) => boolean = () => true): Promise<V> {
    const started = performance.now();
    const reused = this.#entries.get(key);
    if (reused && reused.until > started && reused.changes === changes) return reused.value;
    const seen = changes;
    const value = await read();
    if (!keep(value)) {
      this.#entries.delete(key);
      return value;
    }
    if (this.#entries.size >= LIMIT) this.#entries.clear();
    // From when the read began: a change committed during it is still seen in time.
    this.#entries.delete(key);
    this.#entries.set(key, { value, until: started + REUSE_MS, changes: seen });
    this.#sweepLater(REUSE_MS);
    return value;
  }

  #sweepLater(delayMs: number): void {
    if (this.#sweep !== null) return;
    this.#sweep = setTimeout(() => {
      this.#sweep = null;
      const now = performance.now();
      for (const [key, entry] of this.#entries) {
        if (entry.until > now) {
          this.#sweepLater(Math.max(REUSE_MS / 4, entry.until - now));
          return;
        }
        this.#entries.delete(key);
      }
    }, delayMs);
    this.#sweep.unref();
  }
}

const byStore = new WeakMap<DocumentStore, Map<string, ReusedReads<unknown>>>();

/** The reads of one kind on one store (a test's stores never share what they read). */
export function reusedReads<V>(documents: DocumentStore, kind: string): ReusedReads<V> {
  let kinds = byStore.get(documents);
  if (!kinds) byStore.set(documents, (kinds = new Map()));
  let reads = kinds.get(kind);
  if (!reads) kinds.set(kind, (reads = new ReusedReads<unknown>()));
  return reads as ReusedReads<V>;
}
