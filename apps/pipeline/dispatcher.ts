// The dispatcher of due work: the sender's delivery steps (apps/services/delivery/) and the
// webhooks' attempts (apps/services/webhooks/) are each a schedule of items in the document
// store, each item due at a time. The dispatcher reads what is due, starts items within a bound
// overall and a bound per key (an endpoint, a destination site: a function of the key, read at
// every start, so it may change at run time), and looks again when one ends, when it is kicked
// (new work) or when the next item falls due. Running an item is the source's: it claims the
// item with a lease (another instance cannot take it until the lease ends), does the work and
// reschedules it (its next due time, or done), so a crash anywhere leaves the item due again.
//
// The loop's states are explicit (status()): `running` while its looks succeed, `recovering`
// after a look failed (until one succeeds; looks again after a back-off that doubles from
// pollMs up to MAX_BACKOFF_MS), `stopping`, `stopped`; with the time of the last look and of
// the last item finished. Its liveness (infra/liveness.ts) says the same in the shape every
// part has: an item finished without a throw is progress, and work waits while due items
// (not running already) could not start: every slot or their key's bound taken.

import { Liveness } from '../../infra/liveness.ts';
import { Backoff } from '../../infra/retry.ts';

export interface DueSource<T> {
  /** Items due at `now`, earliest first, at most `limit`. */
  due(now: Date, limit: number): Promise<T[]>;
  /** When the earliest item falls due (null: none is scheduled); without it the dispatcher looks every `pollMs`. */
  nextDueAt?(): Promise<string | null>;
  /** An item's identity: one run per item at a time. */
  id(item: T): string;
  /** The key whose own bound applies to the item. */
  key(item: T): string;
  /** Claims the item with a lease, runs it and reschedules it. A throw is reported; the item stays due after its lease. */
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
/** The longest wait before looking again after failed looks. */
const MAX_BACKOFF_MS = 10_000;

export function startDispatcher<T>(source: DueSource<T>, options: DispatcherOptions): Dispatcher {
  let state: DispatcherState = 'running';
  let lastLookAt: string | null = null;
  let lastProgressAt: string | null = null;
  let lastError: string | null = null;
  // Real time, whatever clock the items are scheduled by: liveness is judged against the wall clock.
  const liveness = options.liveness ?? new Liveness();
  const backoff = new Backoff({ initialDelayMs: options.pollMs, maxDelayMs: Math.max(options.pollMs, MAX_BACKOFF_MS) });
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
    perKey.set(key, (perKey.get(key) ?? 0) + 1);
    const work = source.run(item)
      .then(() => liveness.progress('run'), (error: Error) => options.onError(error))
      .finally(() => {
        const left = perKey.get(key)! - 1;
        if (left === 0) perKey.delete(key);
        else perKey.set(key, left);
        inFlight.delete(id);
        lastProgressAt = options.now().toISOString();
        kick();
      });
    inFlight.set(id, work);
  }

  /** Starts what is due and there is room for; resolves to how long to sleep. */
  async function look(): Promise<number> {
    if (inFlight.size < options.concurrency) {
      if (ready.length === 0) ready = await source.due(options.now(), 2 * options.concurrency);
      let heldBack = false;
      while (ready.length > 0 && !stopping() && inFlight.size < options.concurrency) {
        const item = ready.shift()!;
        // Running already, or its key at its bound: left for a later look, so other keys are not starved.
        if (inFlight.has(source.id(item))) continue;
        if ((perKey.get(source.key(item)) ?? 0) >= options.perKey(source.key(item))) {
          heldBack = true;
          continue;
        }
        start(item);
      }
      liveness.setWaiting(heldBack || ready.some((item) => !inFlight.has(source.id(item))));
    }
    if (!source.nextDueAt) return options.pollMs;
    const next = await source.nextDueAt();
    return next === null ? options.pollMs : Math.min(options.pollMs, Date.parse(next) - options.now().getTime());
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
