// composeMessage on worker threads. Building the MIME and the RSA signature take about 2 ms
// of CPU per message; on the event loop that the API and every processor share (relay start)
// that is time no request is answered in. Here they run on their own threads, and the caller
// gets what composeMessage would have given it: the same bytes, or the same error.
//
// A free thread is given the jobs waiting, in order, as one batch in one message, and answers
// them in one message: on a VM, waking another thread costs more per message than the few KB
// in it, so a burst pays for a few messages rather than two per email. Jobs are handed out
// once the task that queued them is over (process.nextTick, after its promise callbacks), so
// the sends a commit let go at once travel together, and a lone job loses no time (nothing
// waits for a batch to fill); with several threads a free one takes its share of the queue,
// so the others are not left idle. A thread that dies fails the batch it held (nothing says
// which job killed it), and the next batch that needs a thread starts a new one.
// Threads start on first use and are unref'd while idle, so an idle pool keeps no process
// alive and a process that never sends never starts one.
//
// A thread that ends before it said it loaded failed to start (its module threw, the system
// would not give a thread): starting another at once for each batch would fail the same way as
// fast as batches come. Instead every job queued or held fails at once (ComposeThreadStartError,
// retried by the sender as a lost thread is), new ones are refused the same way, and one thread
// is tried again after a back-off (infra/threads/thread-starts.ts) until one loads.
//
// Liveness (infra/liveness.ts): each answer of a thread is progress; a thread lost makes the
// pool `recovering` until the next answer; work waits while a job is queued or composing,
// so a thread that never answers shows as stuck.
import { Worker } from 'node:worker_threads';
import { Liveness } from '../liveness.ts';
import { composeMessage, type ComposedMessage, type ComposeInput } from './compose.ts';
import type { ComposeReply, ComposeRequest, ComposeResult } from './compose-worker.ts';
import { StartFailures, type ThreadStartReport } from '../threads/thread-starts.ts';

/** The most jobs one message carries: a thread that is handed more keeps its callers waiting for all of them. */
const MAX_BATCH = 16;

export interface ComposePoolOptions {
  /** Worker threads; 0 composes on the calling thread. */
  threads: number;
  /** The thread's entry module (tests give one that can be made to crash). */
  workerUrl?: URL;
  /** Told when threads fail to start and when one starts again after failures. */
  onThreadStart?: ThreadStartReport;
}

export type Compose = (input: ComposeInput) => Promise<ComposedMessage>;

interface Job {
  id: number;
  input: ComposeInput;
  resolve: (message: ComposedMessage) => void;
  reject: (error: unknown) => void;
}

interface Thread {
  worker: Worker;
  /** The batch it holds, by job id; empty while it is free. */
  jobs: Map<number, Job>;
  /** Settles once the thread has loaded its modules (or died trying). */
  ready: Promise<void>;
  /** Whether it said it loaded. */
  loaded: boolean;
}

const WORKER_URL = new URL('./compose-worker.ts', import.meta.url);

/**
 * The thread died while composing (a crash, out of memory): nothing says the message is at
 * fault, so callers should try it again rather than fail it for good.
 */
export class ComposeThreadLostError extends Error {}

/** No compose thread could start: the message was not composed; the pool tries again with a back-off. */
export class ComposeThreadStartError extends ComposeThreadLostError {}

export class ComposePool {
  readonly threads: number;
  readonly liveness = new Liveness();
  readonly #workerUrl: URL;
  readonly #queue: Job[] = [];
  readonly #running = new Set<Thread>();
  #nextId = 1;
  #closed = false;
  #dispatching = false;
  #retry: NodeJS.Timeout | null = null;
  /** Threads that failed to start, and the streak under way. */
  readonly starts: StartFailures;

  constructor(options: ComposePoolOptions) {
    if (!Number.isInteger(options.threads) || options.threads < 0) throw new Error(`compose threads must be a whole number ≥ 0, got ${options.threads}`);
    this.threads = options.threads;
    this.#workerUrl = options.workerUrl ?? WORKER_URL;
    this.starts = new StartFailures(options.onThreadStart);
    this.liveness.probeWaiting(async () => this.#queue.length > 0 || [...this.#running].some((t) => t.jobs.size > 0));
  }

  /** composeMessage's contract, on a pool thread. */
  readonly compose: Compose = (input) => {
    if (this.#closed) return Promise.reject(new Error('the compose pool is closed'));
    if (this.threads === 0) return composeMessage(input);
    if (this.starts.failing && !this.#anyLoaded()) return Promise.reject(this.#startError());
    return new Promise<ComposedMessage>((resolve, reject) => {
      this.#queue.push({ id: this.#nextId++, input, resolve, reject });
      if (this.#dispatching) return;
      this.#dispatching = true;
      process.nextTick(() => {
        this.#dispatching = false;
        this.#dispatch();
      });
    });
  };

  /**
   * Starts every thread now and resolves once each has loaded: a thread takes hundreds of
   * milliseconds to start, which a sender must not spend between its claim and its SMTP
   * transaction (a claim older than the grace period is taken for a crashed sender's).
   */
  async warm(): Promise<void> {
    while (!this.#closed && !this.starts.failing && this.#running.size < this.threads) {
      if (!this.#start()) break;
    }
    await Promise.all([...this.#running].map((thread) => thread.ready));
  }

  /** Threads alive now (they start on demand, up to `threads`). */
  get liveThreads(): number {
    return this.#running.size;
  }

  /** Fails what is queued or in flight and stops every thread. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.liveness.stopped();
    if (this.#retry) clearTimeout(this.#retry);
    this.#retry = null;
    const closed = new Error('the compose pool is closed');
    for (const job of this.#queue.splice(0)) job.reject(closed);
    const threads = [...this.#running];
    this.#running.clear();
    for (const thread of threads) {
      for (const job of thread.jobs.values()) job.reject(closed);
      thread.jobs.clear();
    }
    await Promise.all(threads.map((t) => t.worker.terminate()));
  }

  #dispatch(): void {
    while (this.#queue.length > 0 && !this.#closed) {
      let thread: Thread | undefined;
      for (const t of this.#running) if (t.jobs.size === 0) { thread = t; break; }
      if (!thread) {
        // While starts fail, only the retry's back-off starts a thread.
        if (this.#running.size >= this.threads || this.starts.failing) return;
        thread = this.#start() ?? undefined;
        if (!thread) return;
      }
      this.#run(thread, this.#queue.splice(0, Math.min(MAX_BATCH, Math.ceil(this.#queue.length / this.threads))));
    }
  }

  #run(thread: Thread, batch: Job[]): void {
    for (const job of batch) thread.jobs.set(job.id, job);
    thread.worker.ref();
    try {
      thread.worker.postMessage({ jobs: batch.map(({ id, input }) => ({ id, input })) } satisfies ComposeRequest);
    } catch {
      // An input that cannot be cloned (it would not be a ComposeInput) fails the whole
      // message: each job goes on its own, and only those that cannot be sent fail.
      for (const job of batch) {
        try {
          thread.worker.postMessage({ jobs: [{ id: job.id, input: job.input }] } satisfies ComposeRequest);
        } catch (error) {
          thread.jobs.delete(job.id);
          job.reject(error);
        }
      }
      if (thread.jobs.size === 0) thread.worker.unref();
    }
  }

  /** A thread that holds no job is unref'd and given the next batch. */
  #freed(thread: Thread): void {
    if (thread.jobs.size > 0) return;
    thread.worker.unref();
    this.#dispatch();
  }

  /** A new thread; null when none could be made (the jobs were failed). */
  #start(): Thread | null {
    let worker: Worker;
    try {
      // Named for `top -H` and the benches' per-thread CPU (/proc/<pid>/task/*/comm).
      worker = new Worker(this.#workerUrl, { name: 'relay-compose' });
    } catch (error) {
      this.#startFailed(error instanceof Error ? error : new Error(String(error)), []);
      return null;
    }
    let loaded!: () => void;
    const thread: Thread = { worker, jobs: new Map(), ready: new Promise<void>((resolve) => (loaded = resolve)), loaded: false };
    this.#running.add(thread);
    worker.once('exit', () => loaded());
    worker.on('message', (reply: ComposeReply | { ready: true }) => {
      if ('ready' in reply) {
        // Held open while it loads (warm() may be all the process waits for), then let go.
        if (thread.jobs.size === 0) worker.unref();
        thread.loaded = true;
        loaded();
        if (this.starts.failing) {
          this.starts.started();
          this.liveness.succeeded('thread');
        }
        this.#dispatch();
        return;
      }
      if (!this.#running.has(thread)) return;
      this.liveness.progress('thread');
      const answered: Array<[Job, ComposeResult]> = [];
      for (const result of reply.results) {
        const job = thread.jobs.get(result.id);
        if (job && thread.jobs.delete(result.id)) answered.push([job, result]);
      }
      this.#freed(thread);
      for (const [job, result] of answered) {
        if ('error' in result) job.reject(result.error);
        else job.resolve({ raw: Buffer.from(result.raw.buffer, result.raw.byteOffset, result.raw.byteLength), messageId: result.messageId });
      }
    });
    worker.on('messageerror', (error) => {
      const jobs = [...thread.jobs.values()];
      thread.jobs.clear();
      this.#freed(thread);
      for (const job of jobs) job.reject(error);
    });
    // 'error' (an uncaught exception, out of memory) comes before 'exit'; either ends the thread.
    worker.on('error', (error) => this.#lost(thread, error));
    worker.on('exit', (code) => this.#lost(thread, new Error(`exit code ${code}`)));
    return thread;
  }

  #lost(thread: Thread, cause: Error): void {
    if (!this.#running.delete(thread)) return;
    const jobs = [...thread.jobs.values()];
    thread.jobs.clear();
    void thread.worker.terminate();
    if (!thread.loaded && !this.#closed) {
      this.#startFailed(cause, jobs);
      return;
    }
    if (!this.#closed) this.liveness.failed(new Error(`a compose thread stopped: ${cause.message}`, { cause }), 'thread');
    for (const job of jobs) job.reject(new ComposeThreadLostError(`the compose thread stopped while composing this message: ${cause.message}`, { cause }));
    this.#dispatch();
  }

  /** A thread failed to start: every job fails now, and one thread is tried again after the back-off. */
  #startFailed(cause: Error, held: Job[]): void {
    const retryInMs = this.starts.failed(cause);
    this.liveness.failed(new Error(`a compose thread could not start: ${cause.message}`, { cause }), 'thread');
    const error = this.#startError();
    // Queued jobs wait for a thread that still runs, if there is one.
    for (const job of [...held, ...(this.#anyLoaded() ? [] : this.#queue.splice(0))]) job.reject(error);
    if (this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = null;
      if (!this.#closed && this.#running.size < this.threads) this.#start();
    }, retryInMs);
    // A pool nobody uses keeps trying, but keeps no process alive.
    this.#retry.unref();
  }

  #anyLoaded(): boolean {
    for (const thread of this.#running) if (thread.loaded) return true;
    return false;
  }

  #startError(): ComposeThreadStartError {
    const cause = this.starts.lastError;
    return new ComposeThreadStartError(`no compose thread could start${cause ? `: ${cause.message}` : ''}; trying again`, { cause });
  }
}
