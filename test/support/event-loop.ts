// How long the event loop was held: tests that outside input must not freeze the process.

/** The longest stretch the event loop went without running a timer while `work` ran (and until it settled). */
export async function longestStall<T>(work: () => Promise<T>, tickMs = 2): Promise<{ result: T; stallMs: number }> {
  let last = performance.now();
  let longest = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  }, tickMs);
  try {
    const result = await work();
    return { result, stallMs: Math.max(longest, performance.now() - last) };
  } finally {
    clearInterval(tick);
  }
}
