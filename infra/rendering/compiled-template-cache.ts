// Compiled templates by (id, revision). A revision's content never changes (an edit makes
// the next revision, a delete ends the id), so an entry is never stale, only old: the least
// recently used go first once the cache is full.
import type { CompiledTemplate } from './template-renderer.ts';

export class CompiledTemplateCache {
  readonly maxEntries: number;
  // A Map iterates in insertion order; re-inserting on use keeps the oldest first.
  private readonly entries = new Map<string, Promise<CompiledTemplate>>();
  hits = 0;
  misses = 0;

  constructor(maxEntries = 500) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) throw new Error('maxEntries must be a positive integer');
    this.maxEntries = maxEntries;
  }

  static keyOf(id: string, revision: number): string {
    return `${id}@${revision}`;
  }

  get size(): number {
    return this.entries.size;
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
      return cached;
    }
    this.misses++;
    const pending = compile();
    this.entries.set(key, pending);
    pending.catch(() => {
      if (this.entries.get(key) === pending) this.entries.delete(key);
    });
    while (this.entries.size > this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    return pending;
  }

  has(id: string, revision: number): boolean {
    return this.entries.has(CompiledTemplateCache.keyOf(id, revision));
  }

  clear(): void {
    this.entries.clear();
    this.hits = 0;
    this.misses = 0;
  }
}
