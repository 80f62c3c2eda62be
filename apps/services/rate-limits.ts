// Request-rate limits shared by every API process through the document store.
//
// A window of a policy holds `limit` numbered slots; a request takes one by inserting the
// slot's document, whose _id (scope, window, slot number) is unique. Inserts against a unique
// _id are atomic in every adapter (sqlite, MongoDB, and FerretDB, whose read-modify-write
// updates are not: see infra/engines/README.md), so however many processes race, a window
// never holds more than `limit` requests. A request that is then rejected deletes its slot:
// rejected requests do not count, replays and suppressed sends keep theirs.
//
// Clock windows (production key, workspace) are whole seconds of the API clock. A development
// key's window opens with its first accepted request and lasts 60 s; windows are numbered and
// opening number n+1 is again a unique insert, so processes agree on when a window started.
import { RelayError } from '../../domain/errors.ts';
import type { Environment } from '../../domain/management.ts';
import {
  clockWindowAt, openedWindow, rateLimitedMessage, ratePoliciesFor, resetSeconds, retryAfterSeconds, windowRuns,
  type RatePolicy, type RateStanding, type RateWindow,
} from '../../domain/rate-limits.ts';
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';

export const RATE_SLOTS = COLLECTIONS.rateLimitSlots;
export const RATE_WINDOWS = COLLECTIONS.rateLimitWindows;

interface SlotDoc {
  _id: string;
  scope: string;
  window: string;
  slot: number;
  /** Epoch ms after which the slot is garbage. */
  expiresAt: number;
}

interface WindowDoc {
  _id: string;
  scope: string;
  seq: number;
  startMs: number;
  endMs: number;
}

export interface RateSubject {
  keyId: string;
  workspaceId: string;
  environment: Environment;
}

export interface RateReservation {
  standings: RateStanding[];
  /** Gives the slots back: for a request that ends up rejected. */
  release(): Promise<void>;
}

interface Claimed {
  policy: RatePolicy;
  scope: string;
  window: RateWindow;
  slot: number;
  /** This claim opened a first-request window: if it is given back, the window never started. */
  opened: WindowDoc | null;
}

interface Hint {
  /** Next slot number this process tries; null until counted. */
  next: number | null;
  counting: Promise<number> | null;
  /** Slots this process gave back in this window. */
  free: number[];
  endMs: number;
}

const SWEEP_EVERY_MS = 10_000;
/** Slots stay a while past their window so that a clock a little behind still sees them. */
const SLOT_GRACE_MS = 60_000;

export async function ensureRateLimitIndexes(documents: DocumentStore): Promise<void> {
  // A window's slots are found by the _id prefix they share (the primary key), so the only
  // secondary index is the sweeper's: every index costs each request's insert.
  await documents.collection<SlotDoc>(RATE_SLOTS).ensureIndexes([{ name: 'expiresAt', fields: [['expiresAt', 'asc']] }]);
  await documents.collection<WindowDoc>(RATE_WINDOWS).ensureIndexes([{ name: 'scope_seq', fields: [['scope', 'asc'], ['seq', 'desc']] }]);
}

const scopeOf = (policy: RatePolicy, subject: RateSubject) => (policy.name === 'workspace' ? `ws:${subject.workspaceId}` : `key:${subject.keyId}`);
const slotId = (scope: string, window: RateWindow, slot: number) => `${scope}|${window.key}|${slot}`;
/** Every slot id of a window: "<scope>|<window>|" up to, not including, "<scope>|<window>}" ("}" follows "|"). */
const slotsOf = (scope: string, window: RateWindow) => ({ _id: { gte: `${scope}|${window.key}|`, lt: `${scope}|${window.key}}` } });
const windowId = (scope: string, seq: number) => `${scope}|${String(seq).padStart(12, '0')}`;

export class RateLimiter {
  readonly #documents: DocumentStore;
  readonly #hints = new Map<string, Hint>();
  #lastSweep = 0;
  #sweeping: Promise<void> | null = null;

  constructor(documents: DocumentStore) {
    this.#documents = documents;
  }

  get #slots() {
    return this.#documents.collection<SlotDoc>(RATE_SLOTS);
  }

  get #windows() {
    return this.#documents.collection<WindowDoc>(RATE_WINDOWS);
  }

  /** Takes a slot of every policy of the subject, or throws rate_limit_exceeded having taken none. */
  async reserve(subject: RateSubject, now: Date): Promise<RateReservation> {
    const nowMs = now.getTime();
    this.#maybeSweep(nowMs);
    const claimed: Claimed[] = [];
    const standings: RateStanding[] = [];
    for (const policy of ratePoliciesFor(subject.environment)) {
      const scope = scopeOf(policy, subject);
      const { window, opened } = policy.start === 'clock' ? { window: clockWindowAt(policy, nowMs), opened: null } : await this.#currentWindow(policy, scope, nowMs);
      const slot = await this.#claim(scope, window, policy.limit);
      if (slot === null) {
        await this.#giveBack(claimed);
        const wait = retryAfterSeconds(window, nowMs);
        throw new RelayError('rate_limit_exceeded', rateLimitedMessage(wait), {
          retryAfterSeconds: wait,
          standing: { policy, remaining: 0, reset: resetSeconds(window, nowMs) } satisfies RateStanding,
        });
      }
      claimed.push({ policy, scope, window, slot, opened });
      standings.push({ policy, remaining: this.#remaining(scope, window, policy.limit, slot), reset: resetSeconds(window, nowMs) });
    }
    let released = false;
    return {
      standings,
      release: async () => {
        if (released) return;
        released = true;
        await this.#giveBack(claimed);
      },
    };
  }

  /** Waits for background clean-up; call before closing the store. */
  async close(): Promise<void> {
    await this.#sweeping;
  }

  /** The scope's running first-request window, or a new one opened now. */
  async #currentWindow(policy: RatePolicy, scope: string, nowMs: number): Promise<{ window: RateWindow; opened: WindowDoc | null }> {
    for (;;) {
      const [latest] = await this.#windows.find({ where: { scope }, orderBy: [['scope', 'asc'], ['seq', 'desc']], limit: 1 });
      if (latest && windowRuns(latest, nowMs)) return { window: openedWindow(policy, latest.seq, latest.startMs), opened: null };
      const seq = latest ? latest.seq + 1 : 0;
      const window = openedWindow(policy, seq, nowMs);
      const doc: WindowDoc = { _id: windowId(scope, seq), scope, seq, startMs: window.startMs, endMs: window.endMs };
      try {
        await this.#windows.insert(doc);
      } catch (error) {
        if (error instanceof DuplicateKeyError) continue; // another request opened it: use theirs
        throw error;
      }
      // Only the latest two windows are ever looked at; older ones are garbage.
      if (seq >= 2) void this.#windows.delete(windowId(scope, seq - 2)).catch(() => false);
      return { window, opened: doc };
    }
  }

  async #claim(scope: string, window: RateWindow, limit: number): Promise<number | null> {
    const hintKey = `${scope}|${window.key}`;
    let hint = this.#hints.get(hintKey);
    if (!hint) {
      hint = { next: null, counting: null, free: [], endMs: window.endMs };
      this.#hints.set(hintKey, hint);
    }
    if (hint.next === null) {
      // The first request of a window in this process starts after the slots others took.
      hint.counting ??= this.#slots.count(slotsOf(scope, window));
      const counted = await hint.counting;
      hint.next ??= counted;
    }
    let scanned = false;
    for (;;) {
      let slot = hint.free.shift();
      if (slot === undefined && hint.next! < limit) slot = hint.next!++;
      if (slot === undefined) {
        if (scanned) return null;
        // Slots given back by other processes leave holes below `next`: look for them once.
        scanned = true;
        const taken = new Set((await this.#slots.find({ where: slotsOf(scope, window), limit })).map((s) => s.slot));
        hint.free = Array.from({ length: limit }, (_, i) => i).filter((i) => !taken.has(i));
        continue;
      }
      try {
        await this.#slots.insert({ _id: slotId(scope, window, slot), scope, window: window.key, slot, expiresAt: window.endMs + SLOT_GRACE_MS });
        return slot;
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
    }
  }

  #remaining(scope: string, window: RateWindow, limit: number, slot: number): number {
    const hint = this.#hints.get(`${scope}|${window.key}`);
    const next = Math.max(hint?.next ?? slot + 1, slot + 1);
    return Math.max(0, limit - next + (hint?.free.length ?? 0));
  }

  async #giveBack(claimed: Claimed[]): Promise<void> {
    for (const claim of claimed.reverse()) {
      await this.#slots.delete(slotId(claim.scope, claim.window, claim.slot));
      const hint = this.#hints.get(`${claim.scope}|${claim.window.key}`);
      if (hint && !hint.free.includes(claim.slot)) hint.free.push(claim.slot);
      if (claim.opened && (await this.#slots.count(slotsOf(claim.scope, claim.window))) === 0) {
        // The window was opened by a request that was then rejected: it never started. (A
        // request racing into it right now keeps its slot in a window nobody sees any more;
        // that lets at most the racing requests through beyond the limit, once.)
        await this.#windows.delete(claim.opened._id);
      }
    }
  }

  #maybeSweep(nowMs: number): void {
    if (this.#sweeping || nowMs - this.#lastSweep < SWEEP_EVERY_MS) return;
    this.#lastSweep = nowMs;
    for (const [key, hint] of this.#hints) if (hint.endMs <= nowMs) this.#hints.delete(key);
    this.#sweeping = (async () => {
      const expired = await this.#slots.find({ where: { expiresAt: { lt: nowMs } }, limit: 1_000 });
      for (const slot of expired) await this.#slots.delete(slot._id);
    })()
      .catch(() => {}) // garbage stays for the next sweep
      .finally(() => (this.#sweeping = null));
  }
}
