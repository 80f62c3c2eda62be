// A Relay process's start and stop as its supervisor sees them: the steps of a start and giving
// one up when a stop comes meanwhile, the stop's deadline, and the signals (SIGTERM, SIGINT).
import type { Logger } from '../infra/logging.ts';
import type { RunningRelay } from './relay.ts';

/** A start given up because a stop came while it ran (StartingRelay.abandon). */
export class StartAbandonedError extends Error {
  constructor(step: string | null) {
    super(`the start was given up: a stop came while it waited for ${step ?? 'nothing'}`);
    this.name = 'StartAbandonedError';
  }
}

/** A start in progress: the running relay once started, and what a stop that comes meanwhile needs. */
export interface StartingRelay extends Promise<RunningRelay> {
  /** The process's logger, from the start on. */
  readonly logger: Logger;
  /** The step the start is at (`stores`, a part, `pipeline thread`), then what giving it up waits for; null once it ended. */
  waitingFor(): string | null;
  /**
   * Gives the start up: no step begins after the one in progress. Waiting for the stores to open
   * (a broker or a database that does not answer) ends at once; a part's start is let finish,
   * so that it stops as a part does (a delivery in flight is never cut); what started is then
   * stopped. `then` is called once all of it is, just before the start rejects with
   * StartAbandonedError; a start that finished anyway resolves as usual, for the caller to stop.
   */
  abandon(then: () => void): void;
}

/** The step a start is at, and its abandonment: no step begins once it was given up. */
export class StartSteps {
  readonly #abort = new AbortController();
  current: string | null = 'stores';

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  abandon(): void {
    if (!this.#abort.signal.aborted) this.#abort.abort(new StartAbandonedError(this.current));
  }

  run<T>(step: string, work: () => Promise<T>): Promise<T> {
    this.#abort.signal.throwIfAborted();
    this.current = step;
    return work();
  }
}

/**
 * Stops the process: exit `code` once the stop is done, 1 when it failed or did not finish within
 * `timeoutMs` (a handler that never settles, a peer that never answers). Past the deadline it
 * logs what the stop was still waiting for, so a supervisor sees a failed stop, and why, rather
 * than a process that hangs until its SIGKILL.
 */
export function stopAndExit(relay: RunningRelay, timeoutMs: number, code = 0): Promise<never> {
  exitAtDeadline(relay.logger, timeoutMs, () => ({ waitingFor: relay.stopWaitingFor() }));
  return stopThenExit(relay, code);
}

function exitAtDeadline(logger: Logger, timeoutMs: number, waiting: () => Record<string, unknown>): void {
  setTimeout(() => {
    logger.error({ ...waiting(), timeoutMs }, 'shutdown did not finish in time; exiting');
    process.exit(1);
  }, timeoutMs);
}

function stopThenExit(relay: RunningRelay, code = 0): Promise<never> {
  return relay.stop().then(
    () => process.exit(code),
    (error) => {
      relay.logger.error({ err: error }, 'shutdown failed');
      process.exit(1);
    },
  );
}

/**
 * Stops gracefully on SIGTERM/SIGINT within `timeoutMs` (stopAndExit); a second signal exits at
 * once. Given the start itself, a signal that comes while the parts are still starting (/readyz
 * may already answer: a part is listed once it reports) gives the start up (StartingRelay.abandon)
 * under the same deadline, counted from the signal: exit 0 once what started has stopped, 1 with
 * what it still waited for at the deadline (`duringStart: true`).
 */
export function stopOnSignals(starting: RunningRelay | StartingRelay, timeoutMs: number): void {
  let relay: RunningRelay | null = starting instanceof Promise ? null : starting;
  if (starting instanceof Promise) starting.then((started) => (relay = started), () => {});
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(130);
    signalled = true;
    if (relay) {
      relay.logger.info({ signal }, 'shutting down');
      void stopAndExit(relay, timeoutMs);
      return;
    }
    const start = starting as StartingRelay;
    const step = start.waitingFor();
    start.logger.info({ signal, starting: step }, 'shutting down');
    exitAtDeadline(start.logger, timeoutMs, () => ({ waitingFor: relay ? relay.stopWaitingFor() : start.waitingFor(), duringStart: true }));
    start.abandon(() => {
      start.logger.info({ abandoned: step }, 'stopped before the start finished');
      process.exit(0);
    });
    start.then((started) => stopThenExit(started), (error) => {
      start.logger.error({ err: error }, 'the start failed while shutting down');
      process.exit(1);
    });
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
