// parseReport on worker threads (piscina), so that no report, however it is built, costs the
// event loop that the API shares: at most `threads` reports are parsed at once, at most
// `maxWaiting` wait for a thread, and each has `budgetMs` from the moment its thread starts on
// it. A report over its budget is refused (ReportOverBudgetError) and the thread that held it is
// stopped; the pool starts another for the next report.
//
// Threads run at a lower priority than the event loop (niceIncrement). One is always kept: piscina
// replaces a thread stopped mid-task only up to minThreads, so with none kept the reports queued
// behind a stopped one would wait for ever; the others start on demand and stop after a minute idle.
import { Piscina } from 'piscina';
import type { ParsedReport } from './report-parser.ts';
import type { ParseTask } from './report-parse-worker.ts';

export interface ReportParsePoolOptions {
  threads: number;
  /** Wall time a report may take once its thread has started on it. */
  budgetMs: number;
  /** Reports waiting for a thread; one more is refused (ReportParserBusyError). */
  maxWaiting: number;
  /** The thread's entry module (tests give one that can be made to hang). */
  workerUrl?: URL;
}

export class ReportOverBudgetError extends Error {}
export class ReportParserBusyError extends Error {}

const WORKER_URL = new URL('./report-parse-worker.ts', import.meta.url);
const IDLE_MS = 60_000;
/** Under contention the API's event loop comes first; a parse still gets a share of a core. */
const NICE_INCREMENT = 5;

interface Running {
  abort: AbortController;
  timer: NodeJS.Timeout | null;
  overBudget: boolean;
}

export class ReportParsePool {
  readonly #pool: Piscina<ParseTask, ParsedReport>;
  readonly #options: ReportParsePoolOptions;
  /** Submitted and not started yet (or given up while waiting). */
  readonly #waiting = new Map<number, Running>();
  readonly #running = new Map<number, Running>();
  #nextId = 1;

  constructor(options: ReportParsePoolOptions) {
    this.#options = options;
    this.#pool = new Piscina<ParseTask, ParsedReport>({
      filename: (options.workerUrl ?? WORKER_URL).href,
      minThreads: 1,
      maxThreads: options.threads,
      idleTimeout: IDLE_MS,
      niceIncrement: NICE_INCREMENT,
      recordTiming: false,
    });
    // A thread says when it starts a report: the budget is the report's own time, not its wait.
    this.#pool.on('message', (message: { started?: number }) => {
      const running = message.started === undefined ? undefined : this.#waiting.get(message.started);
      if (!running) return;
      this.#waiting.delete(message.started!);
      this.#running.set(message.started!, running);
      running.timer = setTimeout(() => {
        running.overBudget = true;
        running.abort.abort();
      }, this.#options.budgetMs);
    });
    this.#pool.on('error', () => {
      // A thread that died between reports: the pool replaces it on the next one.
    });
  }

  /** Reports waiting for a thread now. */
  get waiting(): number {
    return this.#waiting.size;
  }

  /** parseReport's answer, from a thread; never runs on the caller's event loop. */
  async parse(bytes: Uint8Array): Promise<ParsedReport> {
    if (this.#waiting.size >= this.#options.maxWaiting) throw new ReportParserBusyError('every report parser is busy');
    const id = this.#nextId++;
    const running: Running = { abort: new AbortController(), timer: null, overBudget: false };
    this.#waiting.set(id, running);
    try {
      return await this.#pool.run({ id, bytes }, { signal: running.abort.signal });
    } catch (error) {
      if (running.overBudget) throw new ReportOverBudgetError(`the report took more than ${this.#options.budgetMs} ms to read`, { cause: error });
      throw error;
    } finally {
      if (running.timer) clearTimeout(running.timer);
      this.#waiting.delete(id);
      this.#running.delete(id);
    }
  }

  /** Stops every thread; reports in flight fail. */
  async close(): Promise<void> {
    await this.#pool.destroy();
  }
}
