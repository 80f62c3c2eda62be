// What the usage ledger (./usage-ledger.ts) keeps of the streams it folded, within a budget of
// memory: a month costs memory by its charged emails, so a count of streams would bound neither
// memory (2,000 full months at the default allowance are near a gigabyte) nor keep many small
// months (a charge under an Idempotency-Key needs two streams of its workspace: with more
// workspaces sending than fit, every charge would read its months again from the start).
//
// A month still open is kept as its fold, which charges decide on. A month over and settled is
// only asked, by charges under an Idempotency-Key in the month after, whether an email id was
// charged in it: it is kept as the sorted 53-bit hashes of its email ids, 8 bytes an email
// against 90 to 160 in a fold. A hash found there may be another id's (one chance in 2^53 per
// email of the month; the hash is seeded per process, so that no one can aim for a collision):
// the caller then reads the month to know, as it would without it. Sizes are estimates from the
// counts of charged emails (measured on folds read from a stream, ids of 23 characters).
import { randomInt } from 'node:crypto';
import type { UsageState } from '../../domain/usage/quota.ts';
import type { Loaded } from './command-handler.ts';

export type Folded = Loaded<UsageState>;

/** What the ledger keeps at most (estimated). */
export const USAGE_FOLDS_BUDGET_BYTES = 256 * 1024 * 1024;

/** A stream's fold and its place in the cache, before its charged emails. */
const FOLD_BYTES = 1_024;
/** Each charged email of a fold: its id, its count and a map's entry (87 bytes at 5,000 emails, 160 at 200,000). */
const FOLD_BYTES_PER_EMAIL = 128;
const FINAL_BYTES = 256;
const FINAL_BYTES_PER_EMAIL = 8;

const SEED_1 = randomInt(2 ** 31);
const SEED_2 = randomInt(2 ** 31);

/** cyrb53, seeded: a hash of 53 bits, exact in a double. */
function hash53(text: string): number {
  let h1 = 0xdeadbeef ^ SEED_1;
  let h2 = 0x41c6ce57 ^ SEED_2;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ c, 2654435761);
    h2 = Math.imul(h2 ^ c, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/** A month over and settled, as a charge in the month after asks it. */
export class FinalMonth {
  readonly #hashes: Float64Array;

  constructor(state: UsageState) {
    const hashes = new Float64Array(state.charged.size);
    let i = 0;
    for (const emailId of state.charged) hashes[i++] = hash53(emailId);
    this.#hashes = hashes.sort();
  }

  /** False when the email id was not charged in the month; true when it may have been (read the month to know). */
  mayHaveCharged(emailId: string): boolean {
    const hash = hash53(emailId);
    const hashes = this.#hashes;
    let low = 0;
    let high = hashes.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      if (hashes[middle] < hash) low = middle + 1;
      else if (hashes[middle] > hash) high = middle - 1;
      else return true;
    }
    return false;
  }

  get bytes(): number {
    return FINAL_BYTES + FINAL_BYTES_PER_EMAIL * this.#hashes.length;
  }
}

type Entry = { fold: Folded; final?: never; bytes: number } | { final: FinalMonth; fold?: never; bytes: number };

/** Streams kept, least recently kept or asked first out once their estimates exceed the budget. */
export class UsageFolds {
  readonly #budget: number;
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;

  constructor(budgetBytes: number = USAGE_FOLDS_BUDGET_BYTES) {
    this.#budget = budgetBytes;
  }

  /** The stream's fold, unless it is not kept or kept only as a final month. */
  fold(stream: string): Folded | undefined {
    return this.#entries.get(stream)?.fold;
  }

  /** The stream as a final month, when it is kept as one (it then stays longer). */
  final(stream: string): FinalMonth | undefined {
    const entry = this.#entries.get(stream);
    if (entry?.final) this.#put(stream, entry);
    return entry?.final;
  }

  keep(stream: string, fold: Folded): void {
    this.#put(stream, { fold, bytes: FOLD_BYTES + FOLD_BYTES_PER_EMAIL * fold.state.charged.size });
  }

  /** Keeps the fold of a month that is over and settled as what is asked of it then. */
  keepFinal(stream: string, fold: Folded): void {
    const final = new FinalMonth(fold.state);
    this.#put(stream, { final, bytes: final.bytes });
  }

  forget(stream: string): void {
    const entry = this.#entries.get(stream);
    if (!entry) return;
    this.#entries.delete(stream);
    this.#bytes -= entry.bytes;
  }

  clear(): void {
    this.#entries.clear();
    this.#bytes = 0;
  }

  /** Estimated bytes kept. */
  get bytes(): number {
    return this.#bytes;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The entry stays however large: it is in use, and the others go first. */
  #put(stream: string, entry: Entry): void {
    this.forget(stream);
    this.#entries.set(stream, entry);
    this.#bytes += entry.bytes;
    if (this.#bytes <= this.#budget) return;
    for (const [oldest, kept] of this.#entries) {
      if (this.#bytes <= this.#budget || oldest === stream) break;
      this.#entries.delete(oldest);
      this.#bytes -= kept.bytes;
    }
  }
}
