// Compiled templates by (id, revision). A revision's content never changes (an edit makes
// the next revision, a delete ends the id), so an entry is never stale, only old: the least
// recently used go first once the cache holds `maxEntries`, or once the heap its templates keep
// (their estimatedBytes, template-renderer.ts) passes `maxBytes`. A template larger than
// `maxBytes` on its own renders but is not kept.
import type { CompiledTemplate } from './template-renderer.ts';

interface Entry {
  compiled: Promise<CompiledTemplate>;
  /** Known once compiled; a compilation under way counts for nothing yet. */
  bytes: number;
}

export class CompiledTemplateCache {
  readonly maxEntries: number;
  readonly maxBytes: number;
  // A Map iterates in insertion order; re-inserting on use keeps the oldest first.
  private readonly entries = new Map<string, Entry>();
  #bytes = 0;
  hits = 0;
  misses = 0;

  constructor(maxEntries = 500, maxBytes = Infinity) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new Error('maxEntries must be a positive integer');
    if (!(maxBytes > 0)) throw new Error('maxBytes must be positive');
    this.maxEntries = maxEntries;
    this.maxBytes = maxBytes;
  }

  static keyOf(id: string, revision: number): string {
    return `${id}@${revision}`;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The estimated heap the compiled templates kept here hold. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * The compiled template of this revision, compiled by `compile` on a miss. Concurrent misses
   * share one compilation; a failed one is not kept.
   */
  get(id: string, revision: number, compile: () => Promise<CompiledTemplate>): Promise<CompiledTemplate> {
    const key = CompiledTemplateCache.keyOf(id, revision);
    const cached = this.entries.get(key);
    if (cached) {
      this.hits++;
      this.entries.delete(key);
      this.entries.set(key, cached);
      return cached.compiled;
    }
    this.misses++;
    const entry: Entry = { compiled: compile(), bytes: 0 };
    this.entries.set(key, entry);
    entry.compiled.then(
      (compiled) => {
        if (this.entries.get(key) !== entry) return;
        // Kept, it would push every other template out: it is compiled again when next used.
        if (compiled.estimatedBytes > this.maxBytes) {
          this.entries.delete(key);
          return;
        }
        entry.bytes = compiled.estimatedBytes;
        this.#bytes += entry.bytes;
        this.#evict();
      },
      () => {
        if (this.entries.get(key) === entry) this.entries.delete(key);
      },
    );
    this.#evict();
    return entry.compiled;
  }

  has(id: string, revision: number): boolean {
    return this.entries.has(CompiledTemplateCache.keyOf(id, revision));
  }

  clear(): void {
    this.entries.clear();
    this.#bytes = 0;
    this.hits = 0;
    this.misses = 0;
  }

  #evict(): void {
    for (const [key, entry] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.#bytes <= this.maxBytes) return;
      this.entries.delete(key);
      this.#bytes -= entry.bytes;
    }
  }
}
