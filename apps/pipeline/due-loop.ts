// The loop behind a processor's own schedule (the sender's work items, the webhooks'
// deliveries): run `tick`, then sleep for as long as it says, unless kicked (new work, a slot
// freed) meanwhile. Kicks during a tick make the next one start at once. Work the tick starts
// is tracked here: each piece kicks the loop when it ends, and stop() waits for all of it.
export interface DueLoop {
  kick(): void;
  /** Tracks work started for `id`; when it settles the loop looks again (a slot is free). */
  track(id: string, work: Promise<void>): void;
  isRunning(id: string): boolean;
  /** How many pieces of work are running. */
  readonly running: number;
  /** Ends the loop after the tick that runs, then waits for the work in flight. */
  stop(): Promise<void>;
}

/** @param tick does the due work; resolves to how long to sleep (ms) before the next look. */
export function startDueLoop(tick: () => Promise<number>, onError: (error: Error) => void, fallbackSleepMs: number): DueLoop {
  let stopped = false;
  let kicked = false;
  let wake: (() => void) | null = null;
  const inFlight = new Map<string, Promise<void>>();
  const kick = () => {
    kicked = true;
    wake?.();
  };
  const loop = (async () => {
    // Let the caller finish building what `tick` uses before the first look.
    await Promise.resolve();
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
    kick,
    track(id, work) {
      inFlight.set(id, work.finally(() => {
        inFlight.delete(id);
        kick();
      }));
    },
    isRunning: (id) => inFlight.has(id),
    get running() {
      return inFlight.size;
    },
    async stop() {
      stopped = true;
      wake?.();
      await loop;
      await Promise.allSettled([...inFlight.values()]);
    },
  };
}
