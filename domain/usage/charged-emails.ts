// The emails a month's usage has charged, and how many recipients each: an immutable map that
// only grows (an email id charged stays charged, its count only rises), folded one event at a
// time over a long stream. Laid out as domain/grow-only-set.ts is, for the same reason: `with`
// makes the next map without copying the previous one. The entries live in layers, the oldest
// and largest first; a new layer is merged into the one before it while that one is not more
// than twice its size, so every entry is copied O(log n) times over the map's life and a lookup
// asks O(log n) layers. An email id charged again (rare: see decideCharge) has its new count in
// a newer layer, which a lookup reads first.
export class ChargedEmails implements Iterable<string> {
  static readonly empty = new ChargedEmails([], 0);

  readonly #layers: ReadonlyArray<ReadonlyMap<string, number>>;
  /** Email ids charged. */
  readonly size: number;

  private constructor(layers: ReadonlyArray<ReadonlyMap<string, number>>, size: number) {
    this.#layers = layers;
    this.size = size;
  }

  /** Recipients charged under this email id so far; undefined when it was never charged. */
  recipientsOf(emailId: string): number | undefined {
    // The newest layer first: it holds the latest count, and a retry asks about recent charges.
    for (let i = this.#layers.length - 1; i >= 0; i--) {
      const recipients = this.#layers[i].get(emailId);
      if (recipients !== undefined) return recipients;
    }
    return undefined;
  }

  has(emailId: string): boolean {
    return this.recipientsOf(emailId) !== undefined;
  }

  /** This map with these charges added (each email id's recipients summed); this one unchanged. */
  with(charges: Iterable<{ emailId: string; recipients: number }>): ChargedEmails {
    let added: Map<string, number> | null = null;
    let fresh = 0;
    for (const { emailId, recipients } of charges) {
      const before = added?.get(emailId) ?? this.recipientsOf(emailId);
      if (before === undefined) fresh++;
      (added ??= new Map()).set(emailId, (before ?? 0) + recipients);
    }
    if (added === null) return this;
    const layers = [...this.#layers];
    let top: Map<string, number> = added;
    while (layers.length > 0 && layers[layers.length - 1].size <= 2 * top.size) {
      const below = layers.pop()!;
      const merged = new Map(below);
      for (const [emailId, recipients] of top) merged.set(emailId, recipients);
      top = merged;
    }
    layers.push(top);
    return new ChargedEmails(layers, this.size + fresh);
  }

  /** How many layers a lookup asks (for tests of the bound). */
  get layers(): number {
    return this.#layers.length;
  }

  /** The email ids charged, each once. */
  *[Symbol.iterator](): Iterator<string> {
    for (let i = 0; i < this.#layers.length; i++) {
      const newer = this.#layers.slice(i + 1);
      for (const emailId of this.#layers[i].keys()) if (!newer.some((layer) => layer.has(emailId))) yield emailId;
    }
  }
}
