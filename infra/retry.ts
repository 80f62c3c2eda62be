// Shared by the adapters and parts that retry: a failed call is retried with a capped,
// doubling back-off and never skipped (skipping would silently break the read model behind
// it; a stuck subscription is the visible, recoverable choice).

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}

export interface RetryPolicy {
  initialDelayMs: number;
  maxDelayMs: number;
}

/** The delays of one run of failures: doubling from the first to the cap, back to the first after a success. */
export class Backoff {
  readonly #policy: RetryPolicy;
  #next: number;

  constructor(policy: RetryPolicy) {
    this.#policy = policy;
    this.#next = policy.initialDelayMs;
  }

  /** The delay before the next try, after a failure. */
  next(): number {
    const delay = this.#next;
    this.#next = Math.min(delay * 2, this.#policy.maxDelayMs);
    return delay;
  }

  reset(): void {
    this.#next = this.#policy.initialDelayMs;
  }
}

/**
 * Calls `work` until it succeeds (true) or `signal` aborts (false). `onFailure` is told each
 * failure and the delay before the next try.
 */
export async function retryUntilDone(
  work: () => Promise<void>,
  policy: RetryPolicy,
  signal: AbortSignal,
  onFailure?: (error: unknown, retryInMs: number) => void,
): Promise<boolean> {
  const backoff = new Backoff(policy);
  for (;;) {
    try {
      await work();
      return true;
    } catch (error) {
      if (signal.aborted) return false;
      const delay = backoff.next();
      onFailure?.(error, delay);
      await sleep(delay, signal);
      if (signal.aborted) return false;
    }
  }
}
