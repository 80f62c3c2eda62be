// parseReport on worker threads, so that no report, however it is built, costs the event loop
// that the API shares. `threads` queues of one thread each (infra/threads/worker-queue.ts); a
// report goes to the queue with the fewest reports pending, and at most `maxWaiting` wait in
// all. Each has `budgetMs` from the moment its thread starts on it: a report over its budget is
// refused (ReportOverBudgetError) and its thread replaced for the next one. A thread that cannot
// start (its module fails to load, the system refuses a thread) fails the reports waiting for it
// at once (ReportParserUnavailableError) instead of leaving them to wait for ever, and is tried
// again with a back-off; `onThreadStart` is told once per streak for the whole pool.
//
// Threads run at a lower priority than the event loop (niceIncrement); each is made when its
// queue first gets a report and kept.
import type { ThreadStartReport } from '../threads/thread-starts.ts';
import { WorkerBudgetError, WorkerQueue, WorkerQueueFullError, WorkerStartError } from '../threads/worker-queue.ts';
import type { ParsedReport } from './report-parser.ts';

export interface ReportParsePoolOptions {
  threads: number;
  /** Wall time a report may take once its thread has started on it. */
  budgetMs: number;
  /** Reports waiting for a thread; one more is refused (ReportParserBusyError). */
  maxWaiting: number;
  /** The thread's entry module (tests give one that can be made to hang). */
  workerUrl?: URL;
  /** Told when the threads fail to start, and when one starts again. */
  onThreadStart?: ThreadStartReport;
}

export class ReportOverBudgetError extends Error {}
export class ReportParserBusyError extends Error {}
/** No parser thread could start: the report was not read (the sender should retry). */
export class ReportParserUnavailableError extends Error {}

const WORKER_URL = new URL('./report-parse-worker.ts', import.meta.url);
/** Under contention the API's event loop comes first; a parse still gets a share of a core. */
const NICE_INCREMENT = 5;

export class ReportParsePool {
  readonly #queues: Array<WorkerQueue<Uint8Array, ParsedReport>>;
  readonly #options: ReportParsePoolOptions;

  constructor(options: ReportParsePoolOptions) {
    this.#options = options;
    const threads = Math.max(1, Math.floor(options.threads));
    const reports = poolStartReports(options.onThreadStart, threads);
    this.#queues = reports.map((report) => new WorkerQueue<Uint8Array, ParsedReport>({
      workerUrl: options.workerUrl ?? WORKER_URL,
      maxWaiting: options.maxWaiting,
      budgetMs: options.budgetMs,
      niceIncrement: NICE_INCREMENT,
      name: 'report parsing',
      ...(report ? { onThreadStart: report } : {}),
    }));
  }

  /** Reports waiting for a thread now. */
  get waiting(): number {
    return this.#queues.reduce((sum, queue) => sum + queue.waiting, 0);
  }

  /** parseReport's answer, from a thread; never runs on the caller's event loop. */
  async parse(bytes: Uint8Array): Promise<ParsedReport> {
    if (this.waiting >= this.#options.maxWaiting) throw new ReportParserBusyError('every report parser is busy');
    const queue = this.#queues.reduce((least, next) => (next.pending < least.pending ? next : least));
    try {
      return await queue.run(bytes);
    } catch (error) {
      if (error instanceof WorkerBudgetError) throw new ReportOverBudgetError(`the report took more than ${this.#options.budgetMs} ms to read`, { cause: error });
      if (error instanceof WorkerStartError) throw new ReportParserUnavailableError(error.message, { cause: error });
      if (error instanceof WorkerQueueFullError) throw new ReportParserBusyError('every report parser is busy', { cause: error });
      throw error;
    }
  }

  /** Stops every thread; reports in flight fail. */
  async close(): Promise<void> {
    await Promise.all(this.#queues.map((queue) => queue.close()));
  }
}

/**
 * The queues' start reports, told to `report` as one pool's: a streak begins when the first
 * queue's thread fails to start (its failures counted across the queues) and ends when none is
 * failing any more.
 */
function poolStartReports(report: ThreadStartReport | undefined, queues: number): Array<ThreadStartReport | undefined> {
  if (!report) return Array.from({ length: queues }, () => undefined);
  const failing = new Set<number>();
  let failures = 0;
  let since = 0;
  return Array.from({ length: queues }, (_, queue): ThreadStartReport => ({
    failed(error, _failuresOfQueue, retryInMs) {
      if (failing.size === 0) {
        failures = 0;
        since = Date.now();
      }
      failing.add(queue);
      report.failed(error, ++failures, retryInMs);
    },
    recovered() {
      if (!failing.delete(queue) || failing.size > 0) return;
      report.recovered(failures, Date.now() - since);
    },
  }));
}
