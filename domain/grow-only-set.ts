// An immutable set of strings that only grows, for states folded one event at a time over a long
// stream (a month's charges of a workspace): `with` makes the next set without copying the
// previous one. The elements live in layers, the oldest and largest first; a new layer is
// merged into the one before it while that one is not more than twice its size, so every
// element is copied O(log n) times over the set's life and a lookup asks O(log n) layers.
// Copying the whole set on every fold made each admission cost time in proportion to the
// month's volume so far.
export class GrowOnlySet implements Iterable<string> {
  static readonly empty = new GrowOnlySet([], 0);

  readonly #layers: ReadonlyArray<ReadonlySet<string>>;
  readonly size: number;

  private constructor(layers: ReadonlyArray<ReadonlySet<string>>, size: number) {
    this.#layers = layers;
    this.size = size;
  }

  static of(values: Iterable<string>): GrowOnlySet {
    return GrowOnlySet.empty.with(values);
  }

  has(value: string): boolean {
    // The newest layer first: a retry asks about recent elements.
    for (let i = this.#layers.length - 1; i >= 0; i--) if (this.#layers[i].has(value)) return true;
    return false;
  }

  /** This set with `values` added (this one unchanged); itself when none is new. */
  with(values: Iterable<string>): GrowOnlySet {
    let added: Set<string> | null = null;
    for (const value of values) {
      if (this.has(value) || added?.has(value)) continue;
      (added ??= new Set()).add(value);
    }
    if (added === null) return this;
    const layers = [...this.#layers];
    let top: Set<string> = added;
    while (layers.length > 0 && layers[layers.length - 1].size <= 2 * top.size) {
      const below = layers.pop()!;
      const merged = new Set(below);
      for (const value of top) merged.add(value);
      top = merged;
    }
    layers.push(top);
    return new GrowOnlySet(layers, this.size + added.size);
  }

  /** How many layers a lookup asks (for tests of the bound). */
  get layers(): number {
    return this.#layers.length;
  }

  *[Symbol.iterator](): Iterator<string> {
    for (const layer of this.#layers) yield* layer;
  }
}
