// The one shape of every long-running part of Relay (the forwarder, each processor and its
// dispatcher, retention, the inbound server, the compose and outbox threads, the pipeline
// thread): what state it is in and when it last made progress, so that /readyz, /metrics and
// the logs can say when one has stopped or is stuck, and why (apps/liveness.ts judges).
//
//   running      its last read or write succeeded
//   recovering   its last read or write failed; it retries with a capped back-off from where
//                it was (its checkpoint, its cursor), and says so until one succeeds
//   stopped      it was stopped, or a fatal error (a configuration the store refuses) ended it
//
// A part owns its tracker and tells it what happens; the tracker only records. A part that
// reads and writes in several places (the forwarder reads the event store, publishes to the
// log and saves its checkpoint) names each: it recovers once every one that failed succeeded.

export type PartState = 'running' | 'recovering' | 'stopped';

export interface PartStatus {
  state: PartState;
  /** Since when it is in this state (ISO 8601). */
  since: string;
  /** When it last made progress (ISO 8601): its start, until its first. */
  lastProgressAt: string;
  /** Whether work waits for it: events or records behind it, items due, jobs queued. */
  workWaiting: boolean;
  /** Since when work waits (as first seen); null while none does. */
  waitingSince: string | null;
  /** The failure it is recovering from, or the one that stopped it; null while running. */
  error: string | null;
  /** Set when the part itself knows it is stuck (a processor held one record too long): why. */
  stuck: string | null;
}

export type LivenessListener = (status: PartStatus, previous: PartState) => void;

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

export class Liveness {
  readonly #now: () => Date;
  readonly #listeners = new Set<LivenessListener>();
  #state: PartState = 'running';
  #since: string;
  /** Formatted only when asked: progress is told for every record, the status seldom read. */
  #lastProgressAt: Date;
  #error: string | null = null;
  /** The places whose last call failed, with the failure. */
  readonly #failing = new Map<string, string>();
  #waiting = false;
  #waitingSince: string | null = null;
  #probe: (() => Promise<boolean>) | null = null;
  #stuck: () => string | null = () => null;

  constructor(now: () => Date = () => new Date()) {
    this.#now = now;
    this.#lastProgressAt = now();
    this.#since = this.#lastProgressAt.toISOString();
  }

  get state(): PartState {
    return this.#state;
  }

  /** Told on every change of state (not on each failure while recovering). */
  onChange(listener: LivenessListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Work was done (an event forwarded, a record handled, an item finished): also a success of `place`. */
  progress(place = 'main'): void {
    this.#lastProgressAt = this.#now();
    this.succeeded(place);
  }

  /** A call at `place` succeeded: once none is failing, a recovering part runs again. */
  succeeded(place = 'main'): void {
    if (!this.#failing.delete(place) || this.#state !== 'recovering') return;
    if (this.#failing.size === 0) this.#move('running', null);
    else this.#error = [...this.#failing.values()].at(-1)!;
  }

  /** A call at `place` failed and will be retried. */
  failed(error: unknown, place = 'main'): void {
    if (this.#state === 'stopped') return;
    const message = messageOf(error);
    this.#failing.delete(place);
    this.#failing.set(place, message);
    if (this.#state === 'recovering') this.#error = message;
    else this.#move('recovering', message);
  }

  /** Ends the part: asked to stop (no error), or a fatal error. */
  stopped(error?: unknown): void {
    if (this.#state === 'stopped') return;
    this.#failing.clear();
    this.#move('stopped', error === undefined ? null : messageOf(error));
  }

  /** Whether work waits, as the part knows it without a read. */
  setWaiting(waiting: boolean): void {
    if (waiting && !this.#waiting) this.#waitingSince = this.#now().toISOString();
    if (!waiting) this.#waitingSince = null;
    this.#waiting = waiting;
  }

  /**
   * How to find out whether work waits when that takes a read (a lag): asked by status() instead
   * of the flag; a probe that fails counts as work waiting (what cannot be read may be there).
   */
  probeWaiting(probe: () => Promise<boolean>): void {
    this.#probe = probe;
  }

  /** Why the part is stuck when it can tell (null: it is not). */
  reportStuck(stuck: () => string | null): void {
    this.#stuck = stuck;
  }

  /** The status now, without reads. */
  snapshot(): PartStatus {
    return {
      state: this.#state, since: this.#since, lastProgressAt: this.#lastProgressAt.toISOString(),
      workWaiting: this.#waiting, waitingSince: this.#waitingSince, error: this.#error, stuck: this.#stuck(),
    };
  }

  /** The status now, with the probe's answer for workWaiting. */
  async status(): Promise<PartStatus> {
    if (this.#probe && this.#state !== 'stopped') this.setWaiting(await this.#probe().catch(() => true));
    return this.snapshot();
  }

  #move(state: PartState, error: string | null): void {
    const previous = this.#state;
    this.#state = state;
    this.#since = this.#now().toISOString();
    this.#error = error;
    const status = this.snapshot();
    for (const listener of this.#listeners) {
      try {
        listener(status, previous);
      } catch {
        // A listener (a log line) must not break the part.
      }
    }
  }
}
