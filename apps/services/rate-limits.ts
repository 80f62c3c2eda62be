// Request-rate limits shared by every API process through the document store.
//
// A window of a policy holds `limit` numbered slots; a request takes one by inserting the
// slot's document, whose _id (scope, window, slot number) is unique. Inserts against a unique
// _id are atomic in every adapter (sqlite, MongoDB, and FerretDB, whose read-modify-write
// updates are not: see infra/engines/README.md), so however many processes race, a window
// never holds more than `limit` requests. A request that is then rejected deletes its slot:
// rejected requests do not count, replays and suppressed sends keep theirs.
//
// A send takes its slot before it is checked (apps/services/admission.ts), so a window can be
// full of slots whose requests are still being decided, some of which will be given back. A
// request that finds the window full while this process holds such undecided slots in it waits
// until one is given back (it takes it) or all are kept (429), for at most UNDECIDED_WAIT_MS: a
// rejection in flight never turns a valid request away, and no burst gets past the limit. A
// window full of kept slots is refused at once, from memory, as before. Another process's
// undecided slots cannot be told from kept ones without reading them on every request, so a
// request may still be refused 429 while rejections that another API process is deciding hold
// the window's last slots.
//
// Nothing is counted on the way: a request costs one insert per policy and no read. Each
// process walks a window's slot numbers from its own random starting point (processes sharing
// a window rarely try the same number; a taken one costs a failed insert and the walk goes on)
// and remembers what it tried, so a full window is refused from memory. Only then does it look
// at the window's slots, for numbers given back by other processes, at most every so often
// (doubling while it finds none), and never while it holds every number itself; the numbers it
// holds are not taken for free (a look may not see its slots not committed yet). On FerretDB
// every read scans the collection; on MongoDB and sqlite the look is an _id range.
//
// Expired slots are deleted by a timer (every SWEEP_EVERY_MS, started by the first request,
// unref'd, stopped by close()), in one deleteWhere, never on a request's path. Its clock is
// the requests' clock, the latest request's time (a process without requests makes no new
// garbage), so a clock that tests hold still never sweeps a window they are filling.
//
// Clock windows (production key, workspace) are whole seconds of the API clock. A development
// key's window opens with its first accepted request and lasts 60 s; windows are numbered and
// opening number n+1 is again a unique insert, so processes agree on when a window started.
// The request that opens a window is still undecided: a window whose requests are all rejected
// never started, and the release that leaves it without slots deletes it, whichever request's
// (of several releases, the latest to read the window's slots finds none; #dropIfUnused). A
// window in which a request is kept keeps the time of the request that opened it, which the
// kept one may follow, when the opener is rejected, by at most the time a request takes to be
// decided. A process remembers the running window of each scope and checks by _id that it
// still exists.
// A clock set back before a window's start, by more than processes' clocks differ, opens the
// next window (domain/rate-limits.ts, windowRuns).
import { RelayError } from '../../domain/errors.ts';
import type { Environment } from '../../domain/management.ts';
import {
  CLOCK_SKEW_TOLERANCE_MS, clockWindowAt, openedWindow, rateLimitedMessage, ratePoliciesFor, resetSeconds, retryAfterSeconds, windowRuns,
  type RatePolicy, type RateStanding, type RateWindow,
} from '../../domain/rate-limits.ts';
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import { durableSoFar } from '../../infra/ports/durability.ts';
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
  /** The request was answered (accepted, suppressed, replayed): its slots count and stay taken. */
  keep(): void;
}

interface Claimed {
  policy: RatePolicy;
  scope: string;
  window: RateWindow;
  slot: number;
  /**
   * The first-request window the slot is in (null in a clock window). Whichever release leaves
   * it without slots deletes it, whoever opened it: no accepted request started it.
   */
  windowDoc: WindowDoc | null;
  hint: Hint;
  /** Its request is still being decided: it will be kept or given back. */
  undecided: boolean;
}

interface Hint {
  /** Where this process's walk over the slot numbers starts. */
  start: number;
  /** Slot numbers walked so far: start, start + 1, … (modulo the limit). */
  tried: number;
  /** Slots known to be free: given back in this process, or found free by a look. */
  free: number[];
  /**
   * Slot numbers this process holds (or is inserting), not given back: a look leaves them out,
   * since it may not see them yet (an insert inside an admission's durability scope takes
   * effect before it is committed, and reads see committed data).
   */
  held: Set<number>;
  endMs: number;
  /** When (request clock) this process may look for slots given back by others again. */
  lookAfterMs: number;
  lookGapMs: number;
  /** Slots this process holds (or is inserting) for requests still being decided. */
  undecided: number;
  /** Requests that found the window full, waiting for an undecided slot to be decided. */
  waiting: Set<() => void>;
}

export interface RateLimiterOptions {
  /** How often expired slots are deleted. */
  sweepEveryMs?: number;
  /** The longest a request waits for undecided slots of a full window before it is refused. */
  undecidedWaitMs?: number;
}

export interface ReserveOptions {
  /**
   * The request is decided later: the caller ends the reservation with keep() or release(),
   * and until then requests finding the window full wait for it. Otherwise (previews) it counts
   * once taken.
   */
  undecided?: boolean;
}

const SWEEP_EVERY_MS = 10_000;
/** Slots stay a while past their window so that a clock a little behind still sees them. */
const SLOT_GRACE_MS = CLOCK_SKEW_TOLERANCE_MS;
/** First wait between two looks at a full window's slots; it doubles while they find nothing. */
const FIRST_LOOK_GAP_MS = 100;
/**
 * A guard, not a pace: undecided requests settle within an admission's time (its flow-control
 * wait, RELAY_ADMISSION_MAX_WAIT_MS, 1 s by default, and a few store writes); this only ends the
 * wait of a request behind one that hangs, well before the HTTP request timeout (30 s).
 */
const UNDECIDED_WAIT_MS = 10_000;

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
  /** The running first-request window of each scope, as last seen. */
  readonly #openWindows = new Map<string, WindowDoc>();
  readonly #sweepEveryMs: number;
  readonly #undecidedWaitMs: number;
  /** The latest request's time: the sweeper's clock. */
  #latestRequestMs: number | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #sweeping: Promise<number> | null = null;
  #closed = false;

  constructor(documents: DocumentStore, options: RateLimiterOptions = {}) {
    this.#documents = documents;
    this.#sweepEveryMs = options.sweepEveryMs ?? SWEEP_EVERY_MS;
    this.#undecidedWaitMs = options.undecidedWaitMs ?? UNDECIDED_WAIT_MS;
  }

  get #slots() {
    return this.#documents.collection<SlotDoc>(RATE_SLOTS);
  }

  get #windows() {
    return this.#documents.collection<WindowDoc>(RATE_WINDOWS);
  }

  /**
   * Takes a slot of every policy of the subject for a send still to be decided, or throws
   * rate_limit_exceeded having taken none. The caller ends it with keep() or release().
   */
  reserve(subject: RateSubject, now: Date): Promise<RateReservation> {
    return this.reserveIn(ratePoliciesFor(subject.environment).map((policy) => ({ policy, scope: scopeOf(policy, subject) })), now, { undecided: true });
  }

  /**
   * Takes a slot of each policy in its scope (e.g. "preview:<session>"), in order, or throws
   * having taken none: rate_limit_exceeded, or the store's error.
   */
  async reserveIn(limits: Array<{ policy: RatePolicy; scope: string }>, now: Date, options: ReserveOptions = {}): Promise<RateReservation> {
    const nowMs = now.getTime();
    const undecided = options.undecided ?? false;
    this.#observe(nowMs);
    const waitUntil = performance.now() + this.#undecidedWaitMs;
    // One policy after the other, the narrowest first: a request its key refuses never holds
    // a slot of its workspace, even for a moment, so it cannot crowd out another key's request.
    const claimed: Claimed[] = [];
    const standings: RateStanding[] = [];
    for (const { policy, scope } of limits) {
      let current: { window: RateWindow; doc: WindowDoc | null; opened: boolean } | null = null;
      let hint: Hint;
      let slot: number | null;
      try {
        for (;;) {
          // Again after a wait: a first-request window whose slots were all given back meanwhile never started.
          current = policy.start === 'clock' ? { window: clockWindowAt(policy, nowMs), doc: null, opened: false } : await this.#currentWindow(policy, scope, nowMs);
          hint = this.#hint(scope, current.window, policy.limit);
          slot = await this.#claim(hint, scope, current.window, policy.limit, nowMs, undecided);
          if (slot !== null || !(await this.#decidedMeanwhile(hint, waitUntil))) break;
        }
      } catch (error) {
        // The request fails, which is a rejection: it keeps no slot, and a window it opened never started.
        await this.#giveBack(claimed);
        if (current?.opened && current.doc) await this.#dropIfUnused(scope, current.window, current.doc).catch(() => {});
        throw error;
      }
      const { window, doc } = current;
      if (slot === null) {
        await this.#giveBack(claimed);
        const wait = retryAfterSeconds(window, nowMs);
        throw new RelayError('rate_limit_exceeded', rateLimitedMessage(wait), {
          retryAfterSeconds: wait,
          standing: { policy, remaining: 0, reset: resetSeconds(window, nowMs) } satisfies RateStanding,
        });
      }
      claimed.push({ policy, scope, window, slot, windowDoc: doc, hint, undecided });
      standings.push({ policy, remaining: this.#remaining(scope, window, policy.limit), reset: resetSeconds(window, nowMs) });
    }
    let released = false;
    return {
      standings,
      release: async () => {
        if (released) return;
        released = true;
        await this.#giveBack(claimed);
      },
      keep: () => {
        for (const claim of claimed) this.#decided(claim);
      },
    };
  }

  /**
   * Deletes the slots expired by the requests' clock (or `nowMs`); returns how many. The
   * timer calls it; a sweep still running is joined rather than doubled.
   */
  sweep(nowMs: number | null = this.#latestRequestMs): Promise<number> {
    if (this.#sweeping) return this.#sweeping;
    if (nowMs === null) return Promise.resolve(0);
    // A window's requests still waiting for its slots keep its hint: else they would walk it again, insert by insert.
    for (const [key, hint] of this.#hints) if (hint.endMs <= nowMs && hint.waiting.size === 0) this.#hints.delete(key);
    for (const [scope, window] of this.#openWindows) if (!windowRuns(window, nowMs)) this.#openWindows.delete(scope);
    const sweeping = this.#slots.deleteWhere({ expiresAt: { lt: nowMs } })
      .catch(() => 0) // garbage stays for the next sweep
      .finally(() => (this.#sweeping = null));
    this.#sweeping = sweeping;
    return sweeping;
  }

  /** Stops the sweeper and waits for a sweep in progress; call before closing the store. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#sweeping;
  }

  #observe(nowMs: number): void {
    this.#latestRequestMs = nowMs;
    if (this.#timer || this.#closed) return;
    this.#timer = setInterval(() => void this.sweep(), this.#sweepEveryMs);
    this.#timer.unref();
  }

  /** The scope's running first-request window, or a new one opened now. */
  async #currentWindow(policy: RatePolicy, scope: string, nowMs: number): Promise<{ window: RateWindow; doc: WindowDoc; opened: boolean }> {
    const known = this.#openWindows.get(scope);
    // A window is deleted while it runs only when every request in it was rejected; check it is still there.
    if (known && windowRuns(known, nowMs) && (await this.#windows.get(known._id))?.startMs === known.startMs) {
      return { window: openedWindow(policy, known.seq, known.startMs), doc: known, opened: false };
    }
    this.#openWindows.delete(scope);
    for (;;) {
      const [latest] = await this.#windows.find({ where: { scope }, orderBy: [['scope', 'asc'], ['seq', 'desc']], limit: 1 });
      if (latest && windowRuns(latest, nowMs)) {
        this.#openWindows.set(scope, latest);
        return { window: openedWindow(policy, latest.seq, latest.startMs), doc: latest, opened: false };
      }
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
      this.#openWindows.set(scope, doc);
      return { window, doc, opened: true };
    }
  }

  #hint(scope: string, window: RateWindow, limit: number): Hint {
    const key = `${scope}|${window.key}`;
    let hint = this.#hints.get(key);
    if (!hint) {
      hint = {
        start: Math.floor(Math.random() * limit), tried: 0, free: [], held: new Set(), endMs: window.endMs, lookAfterMs: 0, lookGapMs: FIRST_LOOK_GAP_MS,
        undecided: 0, waiting: new Set(),
      };
      this.#hints.set(key, hint);
    }
    return hint;
  }

  async #claim(hint: Hint, scope: string, window: RateWindow, limit: number, nowMs: number, undecided: boolean): Promise<number | null> {
    let looked = false;
    for (;;) {
      let slot = hint.free.shift();
      if (slot === undefined && hint.tried < limit) slot = (hint.start + hint.tried++) % limit;
      if (slot === undefined) {
        // Every number was tried: only slots given back by other processes are left (none while
        // this process holds every number: the request waits for its own, in turn, at once).
        if (looked || nowMs < hint.lookAfterMs || hint.held.size >= limit) return null;
        looked = true;
        hint.lookAfterMs = nowMs + hint.lookGapMs;
        const taken = new Set((await this.#slots.find({ where: slotsOf(scope, window), limit })).map((s) => s.slot));
        hint.free = Array.from({ length: limit }, (_, i) => i).filter((i) => !taken.has(i) && !hint.held.has(i) && !hint.free.includes(i)).concat(hint.free);
        hint.lookGapMs = hint.free.length > 0 ? FIRST_LOOK_GAP_MS : hint.lookGapMs * 2;
        continue;
      }
      // Counted from the moment the number is taken, not once inserted: a request that finds the
      // window full while this insert is on its way must wait for it rather than be refused.
      if (undecided) hint.undecided++;
      hint.held.add(slot);
      try {
        await this.#slots.insert({ _id: slotId(scope, window, slot), scope, window: window.key, slot, expiresAt: window.endMs + SLOT_GRACE_MS });
        return slot;
      } catch (error) {
        hint.held.delete(slot);
        if (undecided) this.#settled(hint);
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
    }
  }

  /**
   * For a request that found the window full: whether to claim again, once a slot was given
   * back or the undecided slots of this process in the window changed. False at once when there
   * are none (the window is full of kept requests), or when the wait ran out.
   */
  #decidedMeanwhile(hint: Hint, waitUntil: number): Promise<boolean> {
    if (hint.free.length > 0) return Promise.resolve(true);
    const left = waitUntil - performance.now();
    if (hint.undecided === 0 || left <= 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        hint.waiting.delete(wake);
        resolve(true);
      };
      const timer = setTimeout(() => {
        hint.waiting.delete(wake);
        resolve(false);
      }, left);
      hint.waiting.add(wake);
    });
  }

  /** One undecided slot of the window is decided (kept or given back): its waiters claim again. */
  #settled(hint: Hint): void {
    hint.undecided--;
    for (const wake of [...hint.waiting]) wake();
  }

  #decided(claim: Claimed): void {
    if (!claim.undecided) return;
    claim.undecided = false;
    this.#settled(claim.hint);
  }

  /** Requests the window still allows as far as this process knows: numbers not tried yet, and free ones. */
  #remaining(scope: string, window: RateWindow, limit: number): number {
    const hint = this.#hints.get(`${scope}|${window.key}`);
    return hint ? Math.max(0, limit - hint.tried + hint.free.length) : limit - 1;
  }

  /**
   * Gives each claim's slot back, the latest first. A slot that cannot be given back (a store
   * error) stays taken until its window ends and the others are given back all the same: the
   * window then counts one request too many, never lets one too many in.
   */
  async #giveBack(claimed: Claimed[]): Promise<void> {
    for (const claim of [...claimed].reverse()) {
      try {
        await this.#slots.delete(slotId(claim.scope, claim.window, claim.slot));
        claim.hint.held.delete(claim.slot);
        if (!claim.hint.free.includes(claim.slot)) claim.hint.free.push(claim.slot);
      } catch {
        this.#decided(claim); // counted until the window ends
        continue;
      }
      // Its waiters wake once the slot is free, and the window gone if it never started: they look for the window again.
      if (claim.windowDoc) await this.#dropIfUnused(claim.scope, claim.window, claim.windowDoc).catch(() => {});
      this.#decided(claim);
    }
  }

  /**
   * Deletes a first-request window that holds no request, after a request in it was given back
   * (or its opener failed to take a slot): every request it held was rejected, so it never
   * started, and the next request opens the scope's window anew. Every release looks, not only
   * the opener's: of several releases, the latest to read the slots finds none unless a request
   * in the window is kept or still undecided. This process's own slots in it are known without
   * a read (`held`), and asked again after it: one kept means the window started, one undecided
   * will look when it is given back, and either may have been taken while this one read, not
   * committed yet. What this request gave back is made durable first: inside an admission's
   * durability scope a delete takes effect before it is committed, and reads see committed data
   * only, so the read would find the slot itself. Deleted only as opened (its start): a window
   * opened again under the same number meanwhile is not this one. (A request racing into it
   * right now keeps its slot in a window nobody sees any more, as does one of another process
   * whose slot is not committed yet; that lets at most the racing requests through beyond the
   * limit, once.)
   */
  async #dropIfUnused(scope: string, window: RateWindow, doc: WindowDoc): Promise<void> {
    const heldHere = () => (this.#hints.get(`${scope}|${window.key}`)?.held.size ?? 0) > 0;
    if (heldHere()) return;
    await durableSoFar();
    if ((await this.#slots.find({ where: slotsOf(scope, window), limit: 1 })).length > 0 || heldHere()) return;
    await this.#windows.deleteWhere({ _id: doc._id, startMs: doc.startMs });
    const known = this.#openWindows.get(scope);
    if (known?._id === doc._id && known.startMs === doc.startMs) this.#openWindows.delete(scope);
  }
}
