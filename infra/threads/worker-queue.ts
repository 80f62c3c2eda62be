// One worker thread (piscina) and the queue in front of it, for work that must run neither on
// the event loop nor on libuv's thread pool (password hashing; template compiling and
// rendering). Jobs run one at a time, in order; at most `maxWaiting` wait, and the next one is
// refused at once (WorkerQueueFullError). A job that outlasts `budgetMs`, counted from when its
// thread starts on it (not from its wait, nor from a new thread's start-up), is aborted: piscina
// stops the thread (JavaScript cannot be interrupted otherwise) and the job fails with
// WorkerBudgetError; the next job runs on a new thread. `niceIncrement` lowers the thread's
// priority, so that under contention the event loop (the API's requests) comes first.
//
// The pool is made on first use, and its one thread is kept (piscina replaces a thread stopped
// mid-job only up to minThreads: with none kept, the jobs queued behind a stopped one would wait
// for ever); an idle thread keeps no process alive. The thread's module default-exports
// workerTask(handler) (below), which says when it starts each job.
import { parentPort } from 'node:worker_threads';
import { Piscina } from 'piscina';

export interface WorkerQueueOptions {
  /** The thread's module: `export default workerTask(…)`. */
  workerUrl: URL;
  /** Jobs that may wait behind the running one; one more is refused. */
  maxWaiting: number;
  /** Time one job may run once its thread has started on it; none when absent. */
  budgetMs?: number;
  /** Added to the thread's nice value (0–19; Linux): higher gives way to the event loop. */
  niceIncrement?: number;
  /** Names the work in errors ("password hashing"). */
  name: string;
}

/** The queue was full: the caller should answer "busy, retry". */
export class WorkerQueueFullError extends Error {}

/** The job ran past its budget and was stopped. */
export class WorkerBudgetError extends Error {
  readonly budgetMs: number;
  constructor(message: string, budgetMs: number) {
    super(message);
    this.budgetMs = budgetMs;
  }
}

/** What the thread is given: the job and its number, for the "started" message. */
export interface WorkerTask<In> { id: number; job: In }

interface Job {
  abort: AbortController;
  timer: ReturnType<typeof setTimeout> | null;
  overBudget: boolean;
}

export class WorkerQueue<In, Out> {
  readonly #options: WorkerQueueOptions;
  #pool: Piscina<WorkerTask<In>, Out> | null = null;
  /** Submitted, not started yet. */
  readonly #waiting = new Map<number, Job>();
  readonly #running = new Map<number, Job>();
  #nextId = 1;
  #closed = false;
  /** Times a job was stopped for its budget (for tests and metrics). */
  budgetStops = 0;

  constructor(options: WorkerQueueOptions) {
    this.#options = options;
  }

  /** Jobs queued or running. */
  get pending(): number {
    return this.#waiting.size + this.#running.size;
  }

  async run(job: In, transferList: ArrayBuffer[] = []): Promise<Out> {
    const { name, maxWaiting } = this.#options;
    if (this.#closed) throw new Error(`${name}: the worker queue is closed`);
    // One running, maxWaiting behind it.
    if (this.pending > maxWaiting) throw new WorkerQueueFullError(`${name}: ${maxWaiting} jobs are already waiting`);
    const id = this.#nextId++;
    const state: Job = { abort: new AbortController(), timer: null, overBudget: false };
    this.#waiting.set(id, state);
    try {
      return await this.#poolOf().run({ id, job }, { signal: state.abort.signal, transferList });
    } catch (error) {
      if (state.overBudget) throw new WorkerBudgetError(`${name} took longer than ${this.#options.budgetMs} ms`, this.#options.budgetMs!);
      throw error;
    } finally {
      if (state.timer) clearTimeout(state.timer);
      this.#waiting.delete(id);
      this.#running.delete(id);
    }
  }

  /** Stops the thread; jobs queued or running fail. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#pool?.destroy();
    this.#pool = null;
  }

  #poolOf(): Piscina<WorkerTask<In>, Out> {
    if (this.#pool) return this.#pool;
    const pool = new Piscina<WorkerTask<In>, Out>({
      filename: this.#options.workerUrl.href,
      minThreads: 1,
      maxThreads: 1,
      concurrentTasksPerWorker: 1,
      niceIncrement: this.#options.niceIncrement ?? 0,
      recordTiming: false,
    });
    pool.on('message', (message: { started?: number }) => {
      const state = message.started === undefined ? undefined : this.#waiting.get(message.started);
      if (!state) return;
      this.#waiting.delete(message.started!);
      this.#running.set(message.started!, state);
      const budgetMs = this.#options.budgetMs;
      if (budgetMs === undefined) return;
      state.timer = setTimeout(() => {
        state.overBudget = true;
        this.budgetStops++;
        state.abort.abort();
      }, budgetMs);
    });
    pool.on('error', () => {
      // A thread that died between jobs: piscina replaces it for the next one.
    });
    this.#pool = pool;
    return pool;
  }
}

/** The thread side: `export default workerTask(handler)`; tells the queue when each job starts. */
export function workerTask<In, Out>(handle: (job: In) => Out | Promise<Out>): (task: WorkerTask<In>) => Promise<Out> {
  return async ({ id, job }) => {
    parentPort?.postMessage({ started: id });
    return handle(job);
  };
}
