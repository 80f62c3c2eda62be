// Shared by the adapters that deliver events to handlers: a handler failure is retried with a
// capped, doubling back-off and never skipped (skipping would silently break the read model
// behind it; a stuck subscription is the visible, recoverable choice).

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

/** Calls `work` until it succeeds (true) or `signal` aborts (false). */
export async function retryUntilDone(work: () => Promise<void>, policy: RetryPolicy, signal: AbortSignal): Promise<boolean> {
  let delay = policy.initialDelayMs;
  for (;;) {
    try {
      await work();
      return true;
    } catch {
      if (signal.aborted) return false;
      await sleep(delay, signal);
      if (signal.aborted) return false;
      delay = Math.min(delay * 2, policy.maxDelayMs);
    }
  }
}
