// A pool's record of its threads failing to start (a module that throws at load, a thread the
// system will not give: memory, thread limits). A pool whose replacement thread cannot start
// would otherwise leave its jobs waiting for a thread that never comes, with nothing said: with
// this it fails them at once, refuses new ones until a thread starts again, tries again after a
// back-off that doubles up to START_RETRY_MAX_MS, and tells its report of each failure and of
// the recovery (the process logs the first failure of a streak at error, counts each in
// relay_worker_thread_start_failures_total and shows relay_worker_pool_start_failing).

/** The first retry after a failed start; each failure in a row doubles it. */
export const START_RETRY_FIRST_MS = 250;
/** The longest wait between two tries: a pool that recovers does so within this of the cause going away. */
export const START_RETRY_MAX_MS = 30_000;

export interface ThreadStartReport {
  /** A thread failed to start: `failures` in a row so far (1: a streak begins); the next try is in `retryInMs`. */
  failed(error: Error, failures: number, retryInMs: number): void;
  /** A thread started after `failures` failed starts, the first `failingMs` ago. */
  recovered(failures: number, failingMs: number): void;
}

export class StartFailures {
  #failures = 0;
  #since = 0;
  #lastError: Error | null = null;
  readonly #report: ThreadStartReport | undefined;
  /** Failed starts since this pool was made (for tests and metrics). */
  total = 0;

  constructor(report?: ThreadStartReport) {
    this.#report = report;
  }

  /** Whether the last start failed (and none has worked since). */
  get failing(): boolean {
    return this.#failures > 0;
  }

  /** Why the last start failed; null while starts work. */
  get lastError(): Error | null {
    return this.#lastError;
  }

  /** Records a failed start; returns how long to wait before the next try. */
  failed(error: Error): number {
    if (this.#failures === 0) this.#since = Date.now();
    this.#failures++;
    this.total++;
    this.#lastError = error;
    const retryInMs = Math.min(START_RETRY_MAX_MS, START_RETRY_FIRST_MS * 2 ** Math.min(this.#failures - 1, 16));
    this.#report?.failed(error, this.#failures, retryInMs);
    return retryInMs;
  }

  /** A thread started: ends a streak of failures, if any. */
  started(): void {
    if (this.#failures === 0) return;
    const failures = this.#failures;
    this.#failures = 0;
    this.#lastError = null;
    this.#report?.recovered(failures, Date.now() - this.#since);
  }
}

/**
 * The start report of a queue made once per process (password hashing, DKIM keys), told later
 * where to report: the last process part to open its services sets `target`.
 */
export class ForwardedStartReport implements ThreadStartReport {
  target: ThreadStartReport | undefined;

  failed(error: Error, failures: number, retryInMs: number): void {
    this.target?.failed(error, failures, retryInMs);
  }

  recovered(failures: number, failingMs: number): void {
    this.target?.recovered(failures, failingMs);
  }
}
