// The loop behind a processor's own schedule (the sender's work items, the webhooks'
// deliveries): run `tick`, then sleep for as long as it says, unless kicked (new work, a slot
// freed) meanwhile. Kicks during a tick make the next one start at once.
export interface DueLoop {
  kick(): void;
  /** Ends the loop after the tick that runs; resolves once it has. */
  stop(): Promise<void>;
}

/** @param tick does the due work; resolves to how long to sleep (ms) before the next look. */
export function startDueLoop(tick: () => Promise<number>, onError: (error: Error) => void, fallbackSleepMs: number): DueLoop {
  let stopped = false;
  let kicked = false;
  let wake: (() => void) | null = null;
  const loop = (async () => {
    while (!stopped) {
      kicked = false;
      let sleep = fallbackSleepMs;
      try {
        sleep = await tick();
      } catch (error) {
        onError(error as Error);
      }
      if (kicked || stopped) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(sleep, 5));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = null;
    }
  })();
  return {
    kick() {
      kicked = true;
      wake?.();
    },
    async stop() {
      stopped = true;
      wake?.();
      await loop;
    },
  };
}
