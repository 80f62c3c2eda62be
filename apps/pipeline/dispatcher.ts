// The dispatcher of due work: the sender's delivery steps (apps/services/delivery/) and the
// webhooks' attempts (apps/services/webhooks/) are each a schedule of items in the document
// store, each item due at a time. The dispatcher reads what is due, starts items within a bound
// overall and a bound per key (an endpoint, a destination site: a function of the key, read at
// every start, so it may change at run time), and looks again when one ends, when it is kicked
// (new work) or when the next item falls due. Running an item is the source's: it claims the
// item with a lease (another instance cannot take it until the lease ends), does the work and
// reschedules it (its next due time, or done), so a crash anywhere leaves the item due again.
//
// Fairness: each look tells the source which keys are at their bound, so that it can leave
// their items out of what it reads; otherwise a key with a backlog larger than the window fills
// every read and the items of other keys behind it are never read (a slow webhook endpoint
// would hold up every other). A look in which a key reached its bound with more of its items
// read looks again at once, without them. Otherwise the loop sleeps until an item falls due
// after what the look read: what was due by then and could start, did, and what changes that
// (a run ending, new work) kicks the loop. Sleeping until a due time already past would make
// the loop read the same held-back items every few milliseconds.
//
// A run that throws before it rescheduled its item leaves the item due at once: the item is not
// started again before a back-off of its own (doubling from pollMs up to MAX_BACKOFF_MS), and its
// end does not kick the loop. Otherwise each failure would start the next look at once, and with
// a store that answers without I/O (node:sqlite) that is a loop of microtasks that never lets a
// timer fire: the thread, and the API on it, would freeze. The failure goes to onRunFailed, which
// its part counts, and to onError: the loop itself runs on, so its state does not show it.
//
// A run that ends well reschedules its item (due later, or done). One that ends well but leaves
// its item due at the very due time it started from (a step that found nothing to do and did not
// reschedule) would be read and run again at once, forever: the same frozen thread. The first read
// made after such a run tells, by the item's due time (DueSource.dueAt): the same as when the run
// started, and the item backs off as after a failed run (its own back-off, doubling while it keeps
// coming back), and is told to onStuckRun and onError. Any other due time, even one a few
// milliseconds after the old (the sender's site pacing moves its items so), was the run's
// reschedule: the item runs at it. A read that began before the run ended cannot tell, and
// decides nothing.
//
// The loop's states are explicit (status()): `running` while its looks succeed, `recovering`
// after a look failed (until one succeeds; looks again after a back-off that doubles from
// pollMs up to MAX_BACKOFF_MS), `stopping`, `stopped`; with the time of the last look and of
// the last item finished. Its liveness (infra/liveness.ts) says the same in the shape every
// part has: an item finished without a throw is progress, and work waits while due items
// (not running already) could not start: every slot or their key's bound taken, or backing off
// after a failed run (or one that left it due).

import { Liveness } from '../../infra/liveness.ts';
import { Backoff } from '../../infra/retry.ts';

/** An item's due time as its source stores it (an ISO time, say): compared for equality only. */
export type DueTime = string | number | null;

export interface DueSource<T> {
  /**
   * Items due at `now`, earliest first, at most `limit`. The items of the keys in `full` cannot
   * start now (their bound is taken): a source that leaves them out keeps a key's backlog from
   * filling the window, and should.
   */
  due(now: Date, limit: number, full: ReadonlySet<string>): Promise<T[]>;
  /**
   * When the earliest item due after `after` (the time the look read at) falls due (null: none
   * is scheduled); without it the dispatcher looks every `pollMs`. A time at or before `after`
   * is taken as no news: the look has read what was due then.
   */
  nextDueAt?(after: Date): Promise<string | null>;
  /** An item's identity: one run per item at a time. */
  id(item: T): string;
  /** The key whose own bound applies to the item. */
  key(item: T): string;
  /** When the item is due, as read: a run that ends well and leaves the item due changes it (see the top of the file). */
  dueAt(item: T): DueTime;
  /**
   * Claims the item with a lease, runs it and reschedules it. A throw is reported; the item stays
   * due after its lease, and this dispatcher starts it again only after a back-off.
   */
  run(item: T): Promise<void>;
}

export interface DispatcherOptions {
  /** Items running at once, at most. */
  concurrency: number;
  /** Items of one key running at once, at most (read at every start). */
  perKey: (key: string) => number;
  /** The longest sleep between looks at the schedule. */
  pollMs: number;
  now: () => Date;
  onError: (error: Error) => void;
  /** Told of each run that threw (before onError is): its part counts these (relay_dispatch_run_failures_total). */
  onRunFailed?: (error: Error) => void;
  /** Told of each run that ended well but left its item due at the same time (before onError is, with the same error). */
  onStuckRun?: (error: Error) => void;
  /** Its liveness tracker (a new one when not given). */
  liveness?: Liveness;
}

export type DispatcherState = 'running' | 'recovering' | 'stopping' | 'stopped';

export interface DispatcherStatus {
  state: DispatcherState;
  /** Items running now. */
  inFlight: number;
  /** When the last look at the schedule ended (null before the first). */
  lastLookAt: string | null;
  /** When an item last finished (null before the first). */
  lastProgressAt: string | null;
  /** Why the last look failed, while recovering. */
  lastError: string | null;
}

export interface Dispatcher {
  /** Look again now (new work was scheduled). */
  kick(): void;
  status(): DispatcherStatus;
  liveness: Liveness;
  /** Ends the loop after the look that runs, then waits for the items in flight (their outcome is recorded). */
  stop(): Promise<void>;
}

/** The shortest sleep between looks, so a schedule that says "due now" forever cannot spin. */
const MIN_SLEEP_MS = 5;
/** The longest wait before looking again after failed looks, or before running again an item whose run failed. */
const MAX_BACKOFF_MS = 10_000;
/** Items whose back-off after a failed run is remembered, at most (the oldest is forgotten first); so are the due times runs started from. */
const MAX_FAILED_ITEMS = 1_000;

/**
 * Items held back, by item id, each for a delay that doubles while it keeps coming back (the
 * oldest forgotten past MAX_FAILED_ITEMS), timed in monotonic time: a back-off is a duration that
 * never leaves the process, and a wall clock stepped back would hold the item for the step. Two
 * kinds use it: items whose last run failed (held whatever their due time), and items whose run
 * ended well but left them due at the time it started from (held at that due time only: once the
 * item is due at another, rescheduled by another instance say, it is free again and its streak
 * starts over).
 */
class HeldItems {
  readonly #entries = new Map<string, { dueAt: DueTime | undefined; delayMs: number; retryAt: number }>();
  readonly #initialMs: number;
  readonly #maxMs: number;

  constructor(initialMs: number, maxMs: number) {
    this.#initialMs = initialMs;
    this.#maxMs = maxMs;
  }

  /** Holds the item (at `dueAt` only, when given); returns for how long (ms). */
  hold(id: string, dueAt?: DueTime): number {
    const previous = this.#entries.get(id);
    const delayMs = previous && previous.dueAt === dueAt ? Math.min(previous.delayMs * 2, this.#maxMs) : this.#initialMs;
    // Deleted first so that the map's order stays the order of the last holds.
    this.#entries.delete(id);
    this.#entries.set(id, { dueAt, delayMs, retryAt: performance.now() + delayMs });
    if (this.#entries.size > MAX_FAILED_ITEMS) this.#entries.delete(this.#entries.keys().next().value!);
    return delayMs;
  }

  release(id: string): void {
    this.#entries.delete(id);
  }

  /** How long until the item, due at `dueAt`, may run again (0: now). */
  waitMs(id: string, dueAt: DueTime): number {
    const entry = this.#entries.get(id);
    if (!entry) return 0;
    if (entry.dueAt !== undefined && entry.dueAt !== dueAt) {
      this.#entries.delete(id);
      return 0;
    }
    return Math.max(0, entry.retryAt - performance.now());
  }
}

/** Runs that ended well, by item id: the due time each started from, and how many reads had begun when it ended. */
class EndedRuns {
  readonly #entries = new Map<string, { dueAt: DueTime; readsBegun: number }>();

  ended(id: string, dueAt: DueTime, readsBegun: number): void {
    this.#entries.delete(id);
    this.#entries.set(id, { dueAt, readsBegun });
    if (this.#entries.size > MAX_FAILED_ITEMS) this.#entries.delete(this.#entries.keys().next().value!);
  }

  forget(id: string): void {
    this.#entries.delete(id);
  }

  /**
   * Whether the run that ended left the item due at the same time, judged by a read (the
   * `read`-th begun) that found it due at `dueAt`: null when there is no such run, or the read
   * began before it ended (it may predate the run's reschedule). Judged once.
   */
  leftDue(id: string, dueAt: DueTime, read: number): boolean | null {
    const entry = this.#entries.get(id);
    if (!entry || read <= entry.readsBegun) return null;
    this.#entries.delete(id);
    return entry.dueAt === dueAt;
  }
}

export function startDispatcher<T>(source: DueSource<T>, options: DispatcherOptions): Dispatcher {
  let state: DispatcherState = 'running';
  let lastLookAt: string | null = null;
  let lastProgressAt: string | null = null;
  let lastError: string | null = null;
  // Real time, whatever clock the items are scheduled by: liveness is judged against the wall clock.
  const liveness = options.liveness ?? new Liveness();
  const backoff = new Backoff({ initialDelayMs: options.pollMs, maxDelayMs: Math.max(options.pollMs, MAX_BACKOFF_MS) });
  const failedRuns = new HeldItems(options.pollMs, Math.max(options.pollMs, MAX_BACKOFF_MS));
  // Apart from failedRuns: a run that ends well clears its item's failures, but not a streak of
  // runs that leave it due.
  const stuckRuns = new HeldItems(options.pollMs, Math.max(options.pollMs, MAX_BACKOFF_MS));
  const endedRuns = new EndedRuns();
  // Reads of the schedule begun, and which of them `ready` came from.
  let readsBegun = 0;
  let readyFrom = 0;
  let kicked = false;
  let wake: (() => void) | null = null;
  const inFlight = new Map<string, Promise<void>>();
  const perKey = new Map<string, number>();
  // Due items read but not started yet (no room): started before the store is asked again, so a
  // backlog costs one query per batch rather than one per finished item.
  let ready: T[] = [];

  const kick = () => {
    kicked = true;
    wake?.();
  };
  const stopping = () => state === 'stopping' || state === 'stopped';

  function start(item: T): void {
    const id = source.id(item);
    const key = source.key(item);
    const startedDueAt = source.dueAt(item);
    perKey.set(key, (perKey.get(key) ?? 0) + 1);
    endedRuns.forget(id);
    let succeeded = false;
    const work = source.run(item)
      .then(() => {
        succeeded = true;
        failedRuns.release(id);
        endedRuns.ended(id, startedDueAt, readsBegun);
        liveness.progress('run');
      }, (error: Error) => {
        failedRuns.hold(id);
        options.onRunFailed?.(error);
        options.onError(error);
      })
      .finally(() => {
        const left = perKey.get(key)! - 1;
        if (left === 0) perKey.delete(key);
        else perKey.set(key, left);
        inFlight.delete(id);
        lastProgressAt = options.now().toISOString();
        // A failed run's slot is taken at the next look, after the loop's sleep.
        if (succeeded) kick();
      });
    inFlight.set(id, work);
  }

  /** An item whose run ended well but left it due at the time it started from: backs off as after a failed run. */
  function stuck(item: T): void {
    const id = source.id(item);
    const dueAt = source.dueAt(item);
    const delayMs = stuckRuns.hold(id, dueAt);
    const error = new Error(`the run of ${id} ended without error but left it due at the same time (${String(dueAt)}): held back ${delayMs} ms`);
    options.onStuckRun?.(error);
    options.onError(error);
  }

  /** The keys at their bound now: none of their items can start. */
  function fullKeys(): Set<string> {
    const full = new Set<string>();
    for (const [key, running] of perKey) if (running >= options.perKey(key)) full.add(key);
    return full;
  }

  /** Starts what is due and there is room for; resolves to how long to sleep. */
  async function look(): Promise<number> {
    const lookedAt = options.now();
    // The soonest end of a back-off that kept a due item from starting.
    let retryInMs = Infinity;
    if (inFlight.size < options.concurrency) {
      const fullAtRead = fullKeys();
      if (ready.length === 0) {
        readyFrom = ++readsBegun;
        ready = await source.due(lookedAt, 2 * options.concurrency, fullAtRead);
      }
      let heldBack = false;
      // A key that reached its bound in this look while its items filled the read: the next read
      // leaves them out and may find other keys' items behind them.
      let filled = false;
      while (ready.length > 0 && !stopping() && inFlight.size < options.concurrency) {
        const item = ready.shift()!;
        const id = source.id(item);
        // Running already, its key at its bound, or its last run failed not long ago: left for a
        // later look, so other keys are not starved.
        if (inFlight.has(id)) continue;
        const dueAt = source.dueAt(item);
        if (endedRuns.leftDue(id, dueAt, readyFrom)) stuck(item);
        const waitMs = Math.max(failedRuns.waitMs(id, dueAt), stuckRuns.waitMs(id, dueAt));
        const key = source.key(item);
        if (waitMs > 0 || (perKey.get(key) ?? 0) >= options.perKey(key)) {
          heldBack = true;
          if (waitMs > 0) retryInMs = Math.min(retryInMs, waitMs);
          else if (!fullAtRead.has(key)) filled = true;
          continue;
        }
        start(item);
      }
      liveness.setWaiting(heldBack || ready.some((item) => !inFlight.has(source.id(item))));
      if (filled && inFlight.size < options.concurrency) return 0;
    }
    const sleep = Math.min(options.pollMs, retryInMs);
    const next = source.nextDueAt ? await source.nextDueAt(lookedAt) : null;
    // Due by the time this look read: what of it could start, did (see the top of the file).
    if (next === null || Date.parse(next) <= lookedAt.getTime()) return sleep;
    return Math.min(sleep, Date.parse(next) - options.now().getTime());
  }

  const loop = (async () => {
    // Let the caller finish building what the source uses before the first look.
    await Promise.resolve();
    while (!stopping()) {
      kicked = false;
      let sleep = options.pollMs;
      try {
        sleep = await look();
        if (state === 'recovering') state = 'running';
        lastError = null;
        backoff.reset();
        liveness.succeeded('look');
      } catch (error) {
        if (state === 'running') state = 'recovering';
        lastError = (error as Error).message;
        sleep = backoff.next();
        liveness.failed(error, 'look');
        options.onError(error as Error);
      }
      lastLookAt = options.now().toISOString();
      if (kicked || stopping()) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(sleep, MIN_SLEEP_MS));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  })();

  return {
    kick,
    status: () => ({ state, inFlight: inFlight.size, lastLookAt, lastProgressAt, lastError }),
    liveness,
    async stop() {
      if (state === 'stopped') return;
      state = 'stopping';
      wake?.();
      await loop;
      await Promise.allSettled([...inFlight.values()]);
      state = 'stopped';
      liveness.stopped();
    },
  };
}
