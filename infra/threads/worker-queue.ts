// One worker thread (piscina) and the queue in front of it, for work that must run neither on
// the event loop nor on libuv's thread pool (password hashing; template compiling and
// rendering; bounce and complaint reports). Jobs run one at a time. Each job belongs to a
// tenant (one line when none is named), and each tenant's jobs run in the order they came.
//
// Tenants share the thread by the time they use it, not by their number of jobs (start-time
// fair queuing): each tenant has a clock of the thread time its jobs took (from the thread's
// "started" to the answer; a job that ended its thread is charged the replacement thread's
// start-up too), and the next job is the oldest of the tenant whose clock is the lowest, ties
// going to the tenant whose turn came up first. So a tenant whose job just held the thread for
// its whole budget waits while other tenants' jobs of a millisecond run, until they have used
// as much; between tenants whose jobs cost the same, turns alternate one job each. A tenant
// that comes (back) with nothing owed starts at the queue's virtual time (the clock of the
// last job picked): idling banks no credit, and a newcomer's job runs before the backlog of a
// tenant that has used the thread meanwhile. A tenant with nothing waiting keeps its clock only
// while it is ahead of that time (it owes), and when nothing waits or runs the clocks start
// again from zero. At most `maxWaiting` jobs wait
// in all and `maxWaitingPerTenant` of one tenant; the next one is refused at once
// (WorkerQueueFullError), and so is a job still waiting after `maxWaitMs` (WorkerWaitError, a
// WorkerQueueFullError); the time a replacement thread takes to start (after a job ended the
// one before) does not count against a job's wait, and no job is handed to the thread until the
// replacement has loaded, so the first job it runs is chosen among all those waiting by then.
// A job that outlasts `budgetMs`, counted from when its thread starts
// on it (not from its wait, nor from a new thread's start-up), is aborted: piscina stops the
// thread (JavaScript cannot be interrupted otherwise) and the job fails with
// WorkerBudgetError; one that takes the thread past its heap limit (`maxHeapMb`) ends it the
// same way and fails with WorkerOutOfMemoryError. Either way the next job runs on a new thread.
// `niceIncrement` lowers the thread's priority, so that under contention the event loop (the
// API's requests) comes first.
//
// The pool is made on first use, and its one thread is kept (piscina replaces a stopped thread
// only up to minThreads); jobs are handed to it one at a time, so piscina's own queue stays
// empty. An idle thread keeps no process alive. The thread's module default-exports
// workerTask(handler) (below), which says when it has loaded and when it starts each job.
//
// A thread that ends before it said it loaded failed to start (its module threw, the system
// would not give a thread): piscina would not start another until a job came, and the job
// already handed to it would wait for ever. So the pool is dropped, the running and waiting
// jobs fail at once with WorkerStartError, new ones are refused the same way, and a new pool is
// tried after a back-off (./thread-starts.ts) until one's thread loads.
import { parentPort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { StartFailures, type ThreadStartReport } from './thread-starts.ts';

/**
 * The young generation of a thread given a heap limit, MB. Node ends a thread that reaches its
 * limit by letting V8 take 16 MB more to finish the collection under way; promoting a larger
 * young generation (Node 24's default: 192 MB) can take more than that, and V8 then aborts the
 * whole process instead (nodejs/node#47224). With 16, each of some 60 template threads run out
 * of memory in tests was ended cleanly; with the default, 9 of 16 such test processes were
 * aborted. Allocation-heavy template work ran as fast as with the default.
 */
const YOUNG_GENERATION_MB = 16;

export interface WorkerQueueOptions {
  /** The thread's module: `export default workerTask(…)`. */
  workerUrl: URL;
  /** Jobs that may wait behind the running one, all tenants together; one more is refused. */
  maxWaiting: number;
  /** Jobs of one tenant that may wait; one more of that tenant is refused. Default: maxWaiting. */
  maxWaitingPerTenant?: number;
  /** How long a job may wait for its turn; then it is refused (WorkerWaitError). None when absent. */
  maxWaitMs?: number;
  /** Time one job may run once its thread has started on it; none when absent. */
  budgetMs?: number;
  /** The thread's V8 heap (maxOldGenerationSizeMb; its young generation is then YOUNG_GENERATION_MB); Node's defaults when absent. */
  maxHeapMb?: number;
  /** Added to the thread's nice value (0–19; Linux): higher gives way to the event loop. */
  niceIncrement?: number;
  /** Names the work in errors ("password hashing"). */
  name: string;
  /** Told when threads fail to start and when one starts again after failures. */
  onThreadStart?: ThreadStartReport;
}

export interface RunOptions {
  /** Whose job this is (a workspace…): tenants take turns. One shared line when absent. */
  tenant?: string;
  transferList?: ArrayBuffer[];
}

/** The queue was full, or the job waited too long: the caller should answer "busy, retry". */
export class WorkerQueueFullError extends Error {}

/** The job waited `maxWaitMs` without its turn coming, and was dropped before it started. */
export class WorkerWaitError extends WorkerQueueFullError {
  readonly maxWaitMs: number;
  constructor(message: string, maxWaitMs: number) {
    super(message);
    this.maxWaitMs = maxWaitMs;
  }
}

/**
 * No thread could start (its module failed to load, or the system refused a thread): the job
 * was not run. The queue tries again with a back-off; the caller should answer "unavailable,
 * retry".
 */
export class WorkerStartError extends WorkerQueueFullError {}

/** The job ran past its budget and was stopped. */
export class WorkerBudgetError extends Error {
  readonly budgetMs: number;
  constructor(message: string, budgetMs: number) {
    super(message);
    this.budgetMs = budgetMs;
  }
}

/** The job took its thread past the heap limit; the thread was ended (and is replaced). */
export class WorkerOutOfMemoryError extends Error {
  readonly maxHeapMb: number | undefined;
  constructor(message: string, maxHeapMb: number | undefined) {
    super(message);
    this.maxHeapMb = maxHeapMb;
  }
}

/** What the thread is given: the job and its number, for the "started" message. */
export interface WorkerTask<In> { id: number; job: In }

interface Waiting<In, Out> {
  id: number;
  tenant: string;
  prepare: () => In;
  transferList: ArrayBuffer[];
  resolve: (value: Out) => void;
  reject: (error: unknown) => void;
  deadline: ReturnType<typeof setTimeout> | null;
  /** When it is refused for waiting (performance.now()), pushed back by replacement threads' start-ups. */
  dueAt: number;
}

interface Running<In, Out> {
  entry: Waiting<In, Out>;
  abort: AbortController;
  timer: ReturnType<typeof setTimeout> | null;
  overBudget: boolean;
  /** Its thread ended before it loaded. */
  startFailed: boolean;
  /** When it was handed to the thread, and when the thread said it started it (performance.now()). */
  handedAt: number;
  startedAt: number | null;
}

/** A tenant's place in the turns: the thread time it used, on the queue's virtual clock (ms). */
interface Clock {
  used: number;
  /** When its turn came up (a counter): the earlier goes first between equal clocks. */
  since: number;
}

/** A thread being replaced after a loaded one was lost, and by whose job (charged its start-up). */
interface Replacement {
  since: number;
  tenant: string | null;
}

export class WorkerQueue<In, Out> {
  readonly #options: WorkerQueueOptions;
  readonly #perTenant: number;
  #pool: Piscina<WorkerTask<In>, Out> | null = null;
  /** Jobs not started yet, each tenant's in order. */
  readonly #lines = new Map<string, Array<Waiting<In, Out>>>();
  /** The clocks of the tenants waiting or running, and of those idle that still owe thread time. */
  readonly #clocks = new Map<string, Clock>();
  /** The queue's virtual time: the clock of the tenant last picked (never goes back while jobs wait or run). */
  #virtualNow = 0;
  #turnCount = 0;
  /** Set while a replacement thread starts: no job is handed to it, and no wait runs out, until it has loaded. */
  #replacing: Replacement | null = null;
  #waiting = 0;
  #running: Running<In, Out> | null = null;
  #nextId = 1;
  #closed = false;
  /** Whether the pool's thread said it loaded since the last one was lost. */
  #loaded = false;
  /** Set from a thread's failed start until the next try: no job goes to a pool meanwhile. */
  #startBroken = false;
  /** What ended the last thread (piscina tells it after the thread is gone). */
  #lastThreadError: Error | null = null;
  #retry: ReturnType<typeof setTimeout> | null = null;
  /** Threads that failed to start, and the streak under way. */
  readonly starts: StartFailures;
  /** Times a job was stopped for its budget (for tests and metrics). */
  budgetStops = 0;
  /** Times a job ended its thread by running out of memory. */
  memoryStops = 0;
  /** Jobs refused because they waited `maxWaitMs`. */
  waitExpiries = 0;
  /**
   * Threads ended so far by a job (its budget, or its heap): what one thread kept, its successor
   * lacks. A job prepared when its turn comes (runPrepared) can compare it with the value seen
   * when an earlier job succeeded.
   */
  threadGeneration = 0;

  constructor(options: WorkerQueueOptions) {
    this.#options = options;
    this.#perTenant = options.maxWaitingPerTenant ?? options.maxWaiting;
    this.starts = new StartFailures(options.onThreadStart);
  }

  /** Jobs queued, not started yet. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Jobs queued or running. */
  get pending(): number {
    return this.#waiting + (this.#running ? 1 : 0);
  }

  run(job: In, options: RunOptions = {}): Promise<Out> {
    return this.runPrepared(() => job, options);
  }

  /** As run, the job made by `prepare` when its turn comes (and not made at all if it never does). */
  async runPrepared(prepare: () => In, options: RunOptions = {}): Promise<Out> {
    const { name, maxWaiting, maxWaitMs } = this.#options;
    if (this.#closed) throw new Error(`${name}: the worker queue is closed`);
    if (this.starts.failing && !this.#startBroken) throw this.#startError();
    const tenant = options.tenant ?? '';
    // (Nothing runs while a replacement thread starts: the jobs wait all the same.)
    if (this.#running || this.#replacing) {
      if (this.#waiting >= maxWaiting) throw new WorkerQueueFullError(`${name}: ${maxWaiting} jobs are already waiting`);
      if ((this.#lines.get(tenant)?.length ?? 0) >= this.#perTenant) throw new WorkerQueueFullError(`${name}: ${this.#perTenant} jobs of this tenant are already waiting`);
    }
    return new Promise<Out>((resolve, reject) => {
      const now = performance.now();
      const entry: Waiting<In, Out> = {
        id: this.#nextId++, tenant, prepare, transferList: options.transferList ?? [], resolve, reject, deadline: null, dueAt: now + (maxWaitMs ?? Infinity),
      };
      const line = this.#lines.get(tenant);
      if (line) line.push(entry);
      else {
        this.#lines.set(tenant, [entry]);
        // Its turn comes up now (the running tenant's, when its job ends). Nothing owed: from the virtual time.
        const clock = this.#clocks.get(tenant);
        if (!clock) this.#clocks.set(tenant, { used: this.#virtualNow, since: this.#turnCount++ });
        else if (this.#running?.entry.tenant !== tenant) {
          clock.used = Math.max(clock.used, this.#virtualNow);
          clock.since = this.#turnCount++;
        }
      }
      this.#waiting++;
      if (maxWaitMs !== undefined) entry.deadline = setTimeout(() => this.#expire(entry), maxWaitMs);
      this.#next();
    });
  }

  /** Stops the thread; jobs queued or running fail. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    for (const line of this.#lines.values()) {
      for (const entry of line) {
        if (entry.deadline) clearTimeout(entry.deadline);
        entry.reject(new Error(`${this.#options.name}: the worker queue is closed`));
      }
    }
    this.#lines.clear();
    this.#clocks.clear();
    this.#replacing = null;
    this.#waiting = 0;
    await this.#pool?.destroy();
    this.#pool = null;
  }

  /**
   * Drops a job that waited too long: it never started, so no thread time was spent on it. Not
   * while a replacement thread starts: its wait is then pushed back by the start-up (#replaced).
   */
  #expire(entry: Waiting<In, Out>): void {
    entry.deadline = null;
    if (this.#replacing) return;
    const line = this.#lines.get(entry.tenant);
    const at = line?.indexOf(entry) ?? -1;
    if (!line || at < 0) return;
    line.splice(at, 1);
    this.#waiting--;
    if (line.length === 0) {
      this.#lines.delete(entry.tenant);
      this.#forget(entry.tenant);
    }
    this.waitExpiries++;
    const { name, maxWaitMs } = this.#options;
    entry.reject(new WorkerWaitError(`${name}: waited ${maxWaitMs} ms without starting`, maxWaitMs!));
  }

  /** Drops the clock of a tenant with nothing waiting or running once it owes nothing (all of them when the queue is empty). */
  #forget(tenant: string): void {
    if (this.#waiting === 0 && !this.#running) {
      this.#clocks.clear();
      this.#virtualNow = 0;
      return;
    }
    if (this.#lines.has(tenant) || this.#running?.entry.tenant === tenant) return;
    const clock = this.#clocks.get(tenant);
    if (clock && clock.used <= this.#virtualNow) this.#clocks.delete(tenant);
  }

  /** The tenant whose job runs next: the lowest clock among those waiting, the earliest turn between equals. */
  #nextTenant(): string | null {
    let chosen: string | null = null;
    let best: Clock | null = null;
    for (const tenant of this.#lines.keys()) {
      const clock = this.#clocks.get(tenant)!;
      if (!best || clock.used < best.used || (clock.used === best.used && clock.since < best.since)) {
        chosen = tenant;
        best = clock;
      }
    }
    return chosen;
  }

  /** Starts the next tenant's oldest job when the thread is free. */
  #next(): void {
    if (this.#running || this.#closed || this.#startBroken || this.starts.failing) return;
    if (this.#lines.size === 0) return;
    const pool = this.#poolOf();
    // Its thread could not be made: the jobs were refused.
    if (!pool) return;
    // A replacement thread is starting: the job is chosen once it has loaded (piscina starts
    // one for a job only when it has no thread at all).
    if (this.#replacing && pool.threads.length > 0) return;
    const tenant = this.#nextTenant();
    if (tenant === null) return;
    const clock = this.#clocks.get(tenant)!;
    this.#virtualNow = Math.max(this.#virtualNow, clock.used);
    // Idle tenants it has caught up with owe nothing any more.
    for (const [other, { used }] of this.#clocks) {
      if (used <= this.#virtualNow && other !== tenant && !this.#lines.has(other)) this.#clocks.delete(other);
    }
    const line = this.#lines.get(tenant)!;
    const entry = line.shift()!;
    if (line.length === 0) this.#lines.delete(tenant);
    this.#waiting--;
    if (entry.deadline) clearTimeout(entry.deadline);
    const running: Running<In, Out> = {
      entry, abort: new AbortController(), timer: null, overBudget: false, startFailed: false, handedAt: performance.now(), startedAt: null,
    };
    this.#running = running;
    const finish = (ranMs: number) => {
      if (running.timer) clearTimeout(running.timer);
      this.#running = null;
      const own = this.#clocks.get(tenant);
      if (own) {
        own.used += ranMs;
        // Behind every tenant that came up meanwhile, between equal clocks.
        if (this.#lines.has(tenant)) own.since = this.#turnCount++;
      }
      this.#forget(tenant);
      this.#next();
    };
    const ran = () => performance.now() - (running.startedAt ?? running.handedAt);
    let job: In;
    try {
      job = entry.prepare();
    } catch (error) {
      finish(0);
      entry.reject(error);
      return;
    }
    pool.run({ id: entry.id, job }, { signal: running.abort.signal, transferList: entry.transferList }).then(
      (value) => {
        finish(ran());
        entry.resolve(value);
      },
      (error: unknown) => {
        // Before the next job is prepared: it may need to know the thread was replaced.
        const failure = this.#failure(running, error);
        finish(running.startFailed ? 0 : ran());
        entry.reject(failure);
      },
    );
  }

  #failure(running: Running<In, Out>, error: unknown): unknown {
    const { name, budgetMs, maxHeapMb } = this.#options;
    if (running.startFailed) {
      if (error instanceof Error) this.#lastThreadError ??= error;
      return this.#startError();
    }
    if (running.overBudget) {
      this.threadGeneration++;
      return new WorkerBudgetError(`${name} took longer than ${budgetMs} ms`, budgetMs!);
    }
    if ((error as { code?: unknown } | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      this.memoryStops++;
      this.threadGeneration++;
      return new WorkerOutOfMemoryError(`${name} ran out of memory${maxHeapMb === undefined ? '' : ` (${maxHeapMb} MB)`}`, maxHeapMb);
    }
    return error;
  }

  /** The pool, made (its thread starting) if there is none; null when even that failed. */
  #poolOf(): Piscina<WorkerTask<In>, Out> | null {
    if (this.#pool) return this.#pool;
    const { maxHeapMb } = this.#options;
    let pool: Piscina<WorkerTask<In>, Out>;
    try {
      pool = new Piscina<WorkerTask<In>, Out>({
        filename: this.#options.workerUrl.href,
        minThreads: 1,
        maxThreads: 1,
        concurrentTasksPerWorker: 1,
        niceIncrement: this.#options.niceIncrement ?? 0,
        recordTiming: false,
        ...(maxHeapMb === undefined ? {} : { resourceLimits: { maxOldGenerationSizeMb: maxHeapMb, maxYoungGenerationSizeMb: YOUNG_GENERATION_MB } }),
      });
    } catch (error) {
      this.#startBroken = true;
      this.#lastThreadError = error instanceof Error ? error : new Error(String(error));
      this.#startFailed();
      return null;
    }
    this.#loaded = false;
    this.#replacing = null;
    this.#lastThreadError = null;
    pool.on('message', (message: { started?: number; loaded?: true }) => {
      if (pool !== this.#pool) return;
      if (message.loaded) {
        this.#loaded = true;
        this.starts.started();
        if (this.#replacing) this.#replaced(this.#replacing);
        return;
      }
      const running = this.#running;
      if (message.started === undefined || running?.entry.id !== message.started) return;
      running.startedAt = performance.now();
      const budgetMs = this.#options.budgetMs;
      if (budgetMs === undefined) return;
      running.timer = setTimeout(() => {
        running.overBudget = true;
        this.budgetStops++;
        running.abort.abort();
      }, budgetMs);
    });
    pool.on('error', (error: Error) => {
      // A thread that died between jobs: piscina replaces it for the next one (workerDestroy
      // below tells a thread that never loaded).
      // A thread that never loaded is told of after its pool was dropped (workerDestroy comes first).
      if (pool === this.#pool || (this.#startBroken && this.#pool === null)) this.#lastThreadError = error;
    });
    pool.on('workerDestroy', () => {
      if (pool !== this.#pool || this.#closed) return;
      if (this.#loaded) {
        // A thread that ran was lost (its budget, its heap, a crash): its replacement must load.
        // (piscina tells this before it fails the job that was running.)
        this.#loaded = false;
        this.#replacing = { since: performance.now(), tenant: this.#running?.entry.tenant ?? null };
        return;
      }
      this.#pool = null;
      this.#replacing = null;
      this.#startBroken = true;
      this.threadGeneration++;
      if (this.#running) this.#running.startFailed = true;
      // The running job's task is failed by this; piscina names the cause only after this event.
      void pool.destroy();
      setImmediate(() => this.#startFailed());
    });
    this.#pool = pool;
    return pool;
  }

  /**
   * A replacement thread loaded: the tenant whose job ended the one before is charged its
   * start-up, the waits under way are pushed back by it, and the next job is chosen.
   */
  #replaced(replacement: Replacement): void {
    this.#replacing = null;
    const now = performance.now();
    const clock = replacement.tenant === null ? undefined : this.#clocks.get(replacement.tenant);
    if (clock) clock.used += now - replacement.since;
    const maxWaitMs = this.#options.maxWaitMs;
    if (maxWaitMs !== undefined) {
      for (const line of this.#lines.values()) {
        for (const entry of line) {
          // Only the part of the start-up it waited through.
          entry.dueAt += now - Math.max(replacement.since, entry.dueAt - maxWaitMs);
          if (entry.deadline) clearTimeout(entry.deadline);
          entry.deadline = setTimeout(() => this.#expire(entry), Math.max(0, entry.dueAt - now));
        }
      }
    }
    this.#next();
  }

  /** A thread failed to start: every job fails now, and a new pool is tried after the back-off. */
  #startFailed(): void {
    if (this.#closed) return;
    const retryInMs = this.starts.failed(this.#lastThreadError ?? new Error('the thread ended before it loaded'));
    this.#startBroken = false;
    const error = this.#startError();
    for (const line of this.#lines.values()) {
      for (const entry of line) {
        if (entry.deadline) clearTimeout(entry.deadline);
        entry.reject(error);
      }
    }
    this.#lines.clear();
    this.#clocks.clear();
    this.#virtualNow = 0;
    this.#waiting = 0;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      if (this.#closed) return;
      // Starts a thread and waits for it to load (or fail) before any job is let through.
      this.#poolOf();
    }, retryInMs);
    // A pool nobody uses keeps trying, but keeps no process alive.
    this.#retry.unref();
  }

  #startError(): WorkerStartError {
    const cause = this.starts.lastError ?? this.#lastThreadError;
    return new WorkerStartError(`${this.#options.name}: no thread could start${cause ? `: ${cause.message}` : ''}; trying again`, { cause });
  }
}

/**
 * The thread side: `export default workerTask(handler)`, after everything else the module does at
 * load (the call tells the queue the thread started); tells it too when each job starts.
 */
export function workerTask<In, Out>(handle: (job: In) => Out | Promise<Out>): (task: WorkerTask<In>) => Promise<Out> {
  // Called as the module loads: the queue counts on this thread from now on.
  parentPort?.postMessage({ loaded: true });
  return async ({ id, job }) => {
    parentPort?.postMessage({ started: id });
    return handle(job);
  };
}
