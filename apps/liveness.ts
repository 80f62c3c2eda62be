// The liveness of every long-running part of a process (infra/liveness.ts has the shape), and
// the one rule that judges it, for /readyz, /metrics and the log alike (the stores' rule too:
// judgeStore, watchStoreWrites, and withThreadWrites for a store another thread of the process
// writes on connections of its own). A part is not ready when it
//   - has stopped (asked to, or ended by a fatal error),
//   - has been recovering for `stuckAfterMs` (its reads or writes keep failing), or
//   - has had work waiting for `stuckAfterMs` (default 60 s) and made no progress in that
//     time, or says itself that it is stuck (a processor holding one record that long).
// A part that recovers sooner stays ready: /readyz takes a process out of rotation for an
// outage that lasts, not for one failed read. A part the process runs that does not report yet
// (it is still starting) is not ready either. /readyz's checks and relay_part_ready both take
// this verdict from PartsLiveness.verdicts(), so the two never disagree.
//
// The log tells each change as it happens: a part that starts recovering (warn, with the
// failure), runs again (info, with how long it took) or stops on an error (error); and a part
// that turns not ready or ready again (warn / info), looked at every few seconds.
import type { Liveness, PartState, PartStatus } from '../infra/liveness.ts';
import type { PartMetrics } from './relay-metrics.ts';

/** Default of how long a part may recover, or wait with work and no progress, before it is not ready. */
export const STUCK_AFTER_MS = 60_000;
/**
 * How long a part's status may take (its probe reads a lag) before what is known is taken, and
 * how long a store's ping may take: all within the 2 s /readyz gives itself
 * (apps/api/plugins/health.ts), a pipeline thread's answer included.
 */
export const PROBE_TIMEOUT_MS = 1_000;
export const PING_TIMEOUT_MS = 1_500;

export interface PartReport extends PartStatus {
  ready: boolean;
  /** Why it is not ready; null when it is. */
  reason: string | null;
}

interface Logger {
  info(fields: object, message: string): void;
  warn(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

const seconds = (ms: number): string => (ms < 10_000 ? (ms / 1000).toFixed(1) : String(Math.round(ms / 1000)));

/** The rule (see the top): whether a part with this status is ready at `now`, and why not. */
export function judge(status: PartStatus, now: number, stuckAfterMs: number): { ready: boolean; reason: string | null } {
  if (status.state === 'stopped') return { ready: false, reason: status.error ? `stopped: ${status.error}` : 'stopped' };
  const failingFor = now - Date.parse(status.since);
  if (status.state === 'recovering' && failingFor >= stuckAfterMs) {
    return { ready: false, reason: `recovering for ${seconds(failingFor)} s: ${status.error ?? 'its last attempt failed'}` };
  }
  if (status.stuck) return { ready: false, reason: `stuck: ${status.stuck}` };
  // Counted from when the work was first seen waiting: a part idle for an hour is not stuck
  // the moment work arrives.
  const idleFor = now - Math.max(Date.parse(status.lastProgressAt), Date.parse(status.waitingSince ?? status.lastProgressAt));
  if (status.workWaiting && idleFor >= stuckAfterMs) {
    return { ready: false, reason: `work waiting and no progress for ${seconds(idleFor)} s${status.error ? `: ${status.error}` : ''}` };
  }
  return { ready: true, reason: null };
}

/** What `promise` gives within `ms` (a store's ping, a part's probe), else `late()`; a rejection gives `late()` too. */
export function answerWithin<T>(promise: Promise<T>, ms: number, late: () => T): Promise<T> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(late()), ms);
    promise.then((value) => resolve(value), () => resolve(late())).finally(() => clearTimeout(timer));
  });
}

/** A store as readiness sees it (the event store, the document store, the log). */
export interface JudgedStore {
  ping(): Promise<boolean>;
  /** Why it takes no writes, when it can tell (infra/ports: the embedded stores). */
  writeFailure?(): string | null;
}

export interface StoreVerdict {
  ready: boolean;
  /** Why it is not ready; null when it is. */
  reason: string | null;
}

/**
 * The rule for a store, for /readyz (`stores.<store>`, `checks.log`) and relay_store_ready
 * alike: ready when its ping answers true within PING_TIMEOUT_MS. A ping only reads, unless the
 * store remembers that its writes fail: then it tries one write of its own (one at a time),
 * which is how readiness comes back once they go through again.
 */
export async function judgeStore(store: JudgedStore): Promise<StoreVerdict> {
  const ready = await answerWithin(store.ping(), PING_TIMEOUT_MS, () => false);
  return { ready, reason: ready ? null : store.writeFailure?.() ?? `its ping failed or did not answer within ${PING_TIMEOUT_MS / 1000} s` };
}

/** How often watchStoreWrites and followStoreWrites look: they read what each store remembers, no I/O. */
export const STORE_WATCH_MS = 1_000;

/**
 * Calls `onChange` for each store whose write failure (writeFailure) turns to another reason or
 * back to null, looking every `everyMs` at what the store remembers; a store failing at the
 * first look counts as a change. Stores that cannot tell are left alone. Returns stop.
 */
export function followStoreWrites(stores: Record<string, JudgedStore>, onChange: (store: string, reason: string | null) => void, everyMs = STORE_WATCH_MS): () => void {
  const known = new Map<string, string>();
  const look = () => {
    for (const [store, judged] of Object.entries(stores)) {
      const reason = judged.writeFailure?.() ?? null;
      if (reason === (known.get(store) ?? null)) continue;
      if (reason === null) known.delete(store);
      else known.set(store, reason);
      onChange(store, reason);
    }
  };
  const timer = setInterval(look, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * Logs each store whose writes start failing (error, once per cause: `stores` names them, the
 * reason is the store's own) and each that takes writes again (info), so a failure shows in the
 * log when it happens, not only when /readyz or a scrape asks (followStoreWrites). Returns stop.
 */
export function watchStoreWrites(stores: Record<string, JudgedStore>, logger: Logger, everyMs = STORE_WATCH_MS): () => void {
  return followStoreWrites(stores, (store, reason) => {
    if (reason === null) logger.info({ store }, `${store} takes writes again`);
    else logger.error({ store, reason }, `${store} takes no writes: ${reason}; /readyz answers 503 and relay_store_ready{store="${store}"} is 0 while it lasts`);
  }, everyMs);
}

/** A store's writes as another thread of the process sees them on its own connections (the pipeline thread). */
export interface ThreadStoreWrites {
  /** Which thread, as the reason names it. */
  thread: string;
  /** Why the thread's writes to the store fail, as it last said (it looks every STORE_WATCH_MS); null when they do not. */
  failure(): string | null;
  /** The thread's ping of the store (a write of its own while its writes fail, as judgeStore's): whether it takes writes now. */
  ping(): Promise<boolean>;
}

/**
 * A store as judgeStore and watchStoreWrites see it when another thread writes to it too: not
 * ready while either thread's writes fail. The other thread's store is pinged only while it says
 * its writes fail, which is how its readiness comes back without traffic, as this thread's does.
 * While both threads' writes fail, the reason is that of the thread whose writes failed first,
 * so that one failure of the file (a held lock, a full disk) is one cause, told once.
 */
export function withThreadWrites(store: JudgedStore, other: ThreadStoreWrites): JudgedStore {
  let first: 'here' | 'there' | null = null;
  return {
    async ping() {
      const [here, there] = await Promise.all([store.ping(), other.failure() === null ? true : other.ping()]);
      return here && there;
    },
    writeFailure() {
      const here = store.writeFailure?.() ?? null;
      const failure = other.failure();
      const there = failure === null ? null : `${other.thread}: ${failure}`;
      if (here === null && there === null) first = null;
      else if ((first === 'here' ? here : first === 'there' ? there : null) === null) first = here !== null ? 'here' : 'there';
      return first === 'here' ? here : there;
    },
  };
}

/** A status within PROBE_TIMEOUT_MS; past it, what is known without the probe, with work taken as waiting. */
function timely(liveness: Liveness): Promise<PartStatus> {
  return answerWithin(liveness.status(), PROBE_TIMEOUT_MS, () => {
    const known = liveness.snapshot();
    return { ...known, workWaiting: true, waitingSince: known.waitingSince ?? new Date().toISOString() };
  });
}

export interface PartsLivenessOptions {
  stuckAfterMs?: number;
  logger?: Logger;
  /** The parts the process runs, as they report: each is not ready until it reports (while it starts). */
  expected?: readonly string[];
}

/** Every part judged now, and whether each is ready: the one verdict of /readyz and relay_part_ready. */
export interface PartsVerdicts {
  parts: Record<string, PartReport>;
  ready: Record<string, boolean>;
}

/** The parts of one process (and of its pipeline thread), judged by one rule. */
export class PartsLiveness {
  readonly stuckAfterMs: number;
  readonly #logger: Logger | null;
  readonly #expected: readonly string[];
  readonly #parts = new Map<string, Liveness>();
  readonly #remote: Array<() => Promise<Record<string, PartStatus>>> = [];
  readonly #readyBefore = new Map<string, boolean>();
  #watch: NodeJS.Timeout | null = null;

  constructor(options: PartsLivenessOptions = {}) {
    this.stuckAfterMs = options.stuckAfterMs ?? STUCK_AFTER_MS;
    this.#logger = options.logger ?? null;
    this.#expected = options.expected ?? [];
  }

  /** Shows a part: in reports, and in the log when its state changes. */
  add(part: string, liveness: Liveness): void {
    this.#parts.set(part, liveness);
    const logger = this.#logger;
    if (!logger) return;
    let recoveringSince = 0;
    liveness.onChange((status, previous) => {
      const fields = { part, state: status.state, error: status.error ?? undefined };
      if (status.state === 'recovering') {
        recoveringSince = Date.parse(status.since);
        logger.warn(fields, `${part} is recovering: ${status.error}; it retries with a back-off`);
      } else if (status.state === 'running' && previous === 'recovering') {
        const ms = Date.parse(status.since) - recoveringSince;
        logger.info({ ...fields, recoveredAfterSeconds: ms / 1000 }, `${part} recovered after ${seconds(ms)} s`);
      } else if (status.state === 'stopped' && status.error) {
        logger.error(fields, `${part} stopped: ${status.error}`);
      }
    });
  }

  /** Parts whose statuses another thread reports (the pipeline thread's). */
  addRemote(statuses: () => Promise<Record<string, PartStatus>>): void {
    this.#remote.push(statuses);
  }

  /** This thread's own parts, with their probes' answers. */
  async statuses(): Promise<Record<string, PartStatus>> {
    const entries = await Promise.all([...this.#parts].map(async ([part, liveness]) => [part, await timely(liveness)] as const));
    return Object.fromEntries(entries);
  }

  /** Every part, this thread's and the remote ones, judged now. */
  async report(): Promise<Record<string, PartReport>> {
    const [own, ...remote] = await Promise.all([this.statuses(), ...this.#remote.map((statuses) => statuses())]);
    const now = Date.now();
    const report: Record<string, PartReport> = {};
    for (const [part, status] of Object.entries(Object.assign({}, own, ...remote) as Record<string, PartStatus>)) {
      report[part] = { ...status, ...judge(status, now, this.stuckAfterMs) };
    }
    return report;
  }

  /** Every part judged now, with the expected parts that do not report yet as not ready. */
  async verdicts(): Promise<PartsVerdicts> {
    const parts = await this.report();
    const ready: Record<string, boolean> = Object.fromEntries(this.#expected.map((part) => [part, false]));
    for (const [part, report] of Object.entries(parts)) ready[part] = report.ready;
    return { parts, ready };
  }

  /**
   * Sets relay_part_ready (1 when ready) of every part, expected ones still starting included,
   * and relay_part_up (1 while running), relay_part_last_progress_seconds and
   * relay_part_work_waiting of every part that reports.
   */
  async publish(metrics: PartMetrics): Promise<void> {
    const { parts, ready } = await this.verdicts();
    for (const [part, isReady] of Object.entries(ready)) metrics.ready(part).set(isReady ? 1 : 0);
    for (const [part, report] of Object.entries(parts)) {
      metrics.up(part).set(report.state === 'running' ? 1 : 0);
      metrics.lastProgress(part).set(Date.parse(report.lastProgressAt) / 1000);
      metrics.workWaiting(part).set(report.workWaiting ? 1 : 0);
    }
  }

  /** Logs each part that turns not ready or ready again, looking every few seconds, until stopWatching(). */
  watch(): void {
    const logger = this.#logger;
    if (!logger || this.#watch) return;
    const every = Math.max(100, Math.min(5_000, Math.floor(this.stuckAfterMs / 4)));
    let looking = false;
    this.#watch = setInterval(() => {
      if (looking) return;
      looking = true;
      this.report().then((report) => {
        for (const [part, { ready, reason, state }] of Object.entries(report)) {
          const before = this.#readyBefore.get(part) ?? true;
          this.#readyBefore.set(part, ready);
          if (before && !ready && state !== 'stopped') logger.warn({ part, reason }, `${part} is not ready: ${reason}; /readyz answers 503`);
          else if (!before && ready) logger.info({ part }, `${part} is ready again`);
        }
      }).finally(() => (looking = false));
    }, every);
    this.#watch.unref();
  }

  stopWatching(): void {
    if (this.#watch) clearInterval(this.#watch);
    this.#watch = null;
  }
}

export type { PartState, PartStatus };
