// Slow webhook endpoints, as an MTA treats slow destinations: an endpoint whose last request
// (in this process) timed out or took at least a third of an attempt's time limit is slow
// until a request of its ends sooner. Slow endpoints together may hold at most a share (half)
// of the dispatcher's requests in flight; once they hold that many, none of them starts
// another, and their due deliveries are left out of the dispatcher's reads as those of an
// endpoint at its own bound are (apps/pipeline/dispatcher.ts). So endpoints that answer keep
// the other half of the slots, however many deliveries to hanging receivers are due before
// theirs, and start within a look of the schedule. Until its first slow request ends, an
// endpoint is not known to be slow: a wave of new hanging endpoints may hold every slot for
// one attempt's time limit, not longer. State is in memory, per process, and bounded.
import type { AttemptResult } from '../../../infra/ports/http-egress.ts';
import { ATTEMPT_TIME_LIMIT_MS } from './attempt.ts';

/** A request that took this long, or timed out, makes its endpoint slow: a third of an attempt's time limit. */
export const SLOW_REQUEST_MS = ATTEMPT_TIME_LIMIT_MS / 3;
/** Slow endpoints remembered, at most: the one whose last slow request ended longest ago is forgotten first. */
export const MAX_SLOW_ENDPOINTS = 4_096;

export const isSlowRequest = (result: AttemptResult): boolean => result.errorCode === 'timeout' || result.durationMs >= SLOW_REQUEST_MS;

export class SlowEndpoints {
  /** Slow endpoints, oldest slow request first (a Set keeps insertion order). */
  readonly #slow = new Set<string>();
  /** Requests in flight (runs started, not ended) by endpoint. */
  readonly #running = new Map<string, number>();
  /** Slow endpoints whose due deliveries were read while slow endpoints held their share: left out of the next reads. */
  readonly #leftOut = new Set<string>();
  readonly #share: number;
  readonly #perEndpoint: number;

  /** `share`: the requests in flight that slow endpoints may hold together; `perEndpoint`: an endpoint's own bound. */
  constructor(options: { share: number; perEndpoint: number }) {
    this.#share = options.share;
    this.#perEndpoint = options.perEndpoint;
  }

  /** A request to the endpoint ended with `result`. */
  requestEnded(endpointId: string, result: AttemptResult): void {
    this.#slow.delete(endpointId);
    if (!isSlowRequest(result)) {
      this.#leftOut.delete(endpointId);
      return;
    }
    this.#slow.add(endpointId);
    if (this.#slow.size > MAX_SLOW_ENDPOINTS) {
      const oldest = this.#slow.values().next().value!;
      this.#slow.delete(oldest);
      this.#leftOut.delete(oldest);
    }
  }

  isSlow(endpointId: string): boolean {
    return this.#slow.has(endpointId);
  }

  /** How many endpoints are slow now. */
  get count(): number {
    return this.#slow.size;
  }

  /** A run of one of the endpoint's deliveries started. */
  started(endpointId: string): void {
    this.#running.set(endpointId, (this.#running.get(endpointId) ?? 0) + 1);
  }

  /** A run started with `started` ended. */
  ended(endpointId: string): void {
    const left = (this.#running.get(endpointId) ?? 1) - 1;
    if (left === 0) this.#running.delete(endpointId);
    else this.#running.set(endpointId, left);
  }

  /** Requests in flight to slow endpoints. */
  slowInFlight(): number {
    let running = 0;
    for (const [endpointId, count] of this.#running) if (this.#slow.has(endpointId)) running += count;
    return running;
  }

  /** Slow endpoints hold their share of the requests in flight: none of them may start another. */
  saturated(): boolean {
    return this.slowInFlight() >= this.#share;
  }

  /** The endpoint's bound of requests in flight now (the dispatcher's perKey): 0 for a slow one while slow endpoints hold their share. */
  bound(endpointId: string): number {
    return this.#slow.has(endpointId) && this.saturated() ? 0 : this.#perEndpoint;
  }

  /**
   * The endpoints to leave out of a read of the schedule: `full` (those at their bound, which
   * includes the slow ones running while slow endpoints hold their share) and, while they do, the
   * slow endpoints whose deliveries earlier reads found (`read` tells of each read's deliveries).
   * Not every slow endpoint remembered: each one left out costs the read a range of its own.
   */
  leftOut(full: ReadonlySet<string>): ReadonlySet<string> {
    if (!this.saturated()) {
      this.#leftOut.clear();
      return full;
    }
    if (this.#leftOut.size === 0) return full;
    return new Set([...full, ...this.#leftOut]);
  }

  /** A read of the schedule found deliveries to these endpoints: the slow ones are left out of the next reads while slow endpoints hold their share. */
  read(endpointIds: Iterable<string>): void {
    if (!this.saturated()) return;
    for (const endpointId of endpointIds) if (this.#slow.has(endpointId)) this.#leftOut.add(endpointId);
  }
}
