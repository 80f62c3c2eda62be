// How fast the feedback server reads DATA, all sessions together: a report costs the event loop
// that the API shares a few milliseconds per MiB (smtp-server's dot unstuffing, the cut and the
// digest), so the bytes read per second bound the share of it that reports can take, however
// fast the senders can send. A sender over its share is not refused: its transfer is read later,
// and TCP flow control slows it down (as Postfix's in_flow_delay slows a client down).
//
// A generic cell rate algorithm over bytes: each read pushes the theoretical time by its
// share; up to `burstBytes` may go at once.

export class ReadRate {
  readonly #bytesPerMs: number;
  readonly #burstMs: number;
  readonly #now: () => number;
  /** When the bytes read so far would have been read at the rate (on the `now` clock, ms). */
  #theoretical = 0;

  constructor(bytesPerSecond: number, burstBytes: number, now: () => number = () => performance.now()) {
    this.#bytesPerMs = bytesPerSecond / 1000;
    this.#burstMs = burstBytes / this.#bytesPerMs;
    this.#now = now;
  }

  /** Counts `bytes` as read; the milliseconds to wait before reading on (0: at once). */
  delay(bytes: number): number {
    const now = this.#now();
    this.#theoretical = Math.max(this.#theoretical, now) + bytes / this.#bytesPerMs;
    return Math.max(0, this.#theoretical - this.#burstMs - now);
  }
}
