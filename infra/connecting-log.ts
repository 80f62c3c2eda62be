// A log connected behind the process, for processes that neither publish to it nor consume
// from it (the API alone reads consumer groups' offsets, for admission flow control and
// /metrics, and nothing else): such a process must start and serve while the log's brokers
// are down, so the connection is tried again, with a doubling wait, until it is made.
// Until then the log cannot be read: groupOffsets rejects with LogNotConnectedError and ping
// answers false, as for a log that does not answer. What writes or consumes waits for the
// connection (close() ends the wait with an error).
import type { ConsumeOptions, GroupPartitionOffsets, Log, LogConsumer, OutgoingRecord } from './ports/log.ts';

export class LogNotConnectedError extends Error {
  override name = 'LogNotConnectedError';
}

export interface ConnectingLogOptions {
  /** The wait after the first failed attempt; it doubles up to maxRetryDelayMs. Default 1 s. */
  retryDelayMs?: number;
  /** Default 30 s. */
  maxRetryDelayMs?: number;
  /** Each failed attempt, with how many failed in a row and the wait before the next. */
  onRetry?: (error: Error, failures: number, delayMs: number) => void;
  /** Once connected. */
  onConnected?: () => void;
}

const errorOf = (value: unknown): Error => (value instanceof Error ? value : new Error(String(value)));

export class ConnectingLog implements Log {
  readonly #options: ConnectingLogOptions;
  readonly #ready = Promise.withResolvers<Log>();
  #log: Log | null = null;
  #closed = false;
  #wait: { timer: NodeJS.Timeout; wake: () => void } | null = null;

  /** Starts connecting at once; `connect` is one attempt (it may retry within itself). */
  constructor(connect: () => Promise<Log>, options: ConnectingLogOptions = {}) {
    this.#options = options;
    // Nobody may be waiting when close() ends the wait.
    this.#ready.promise.catch(() => {});
    void this.#connect(connect);
  }

  /** Whether the connection is made (and the log not closed). */
  get connected(): boolean {
    return this.#log !== null && !this.#closed;
  }

  async #connect(connect: () => Promise<Log>): Promise<void> {
    let delay = this.#options.retryDelayMs ?? 1000;
    for (let failures = 1; !this.#closed; failures++) {
      try {
        const log = await connect();
        if (this.#closed) {
          // Closed while the attempt was under way: nobody else will close this one.
          await log.close().catch(() => {});
          return;
        }
        this.#log = log;
        this.#ready.resolve(log);
        this.#options.onConnected?.();
        return;
      } catch (error) {
        if (this.#closed) return;
        this.#options.onRetry?.(errorOf(error), failures, delay);
      }
      await new Promise<void>((wake) => {
        this.#wait = { timer: setTimeout(wake, delay), wake };
      });
      this.#wait = null;
      delay = Math.min(delay * 2, this.#options.maxRetryDelayMs ?? 30_000);
    }
  }

  #now(): Log {
    if (this.#closed) throw new Error('the log is closed');
    if (this.#log === null) throw new LogNotConnectedError('the log is not connected yet');
    return this.#log;
  }

  async ensureTopic(topic: string, partitions: number): Promise<void> {
    await (await this.#ready.promise).ensureTopic(topic, partitions);
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    await (await this.#ready.promise).publish(topic, records);
  }

  async consume(options: ConsumeOptions): Promise<LogConsumer> {
    return (await this.#ready.promise).consume(options);
  }

  async groupOffsets(topic: string, groups: readonly string[]): Promise<GroupPartitionOffsets[]> {
    return this.#now().groupOffsets(topic, groups);
  }

  followsEventStore(topic: string): boolean {
    return this.#log?.followsEventStore?.(topic) ?? false;
  }

  async ping(): Promise<boolean> {
    return this.connected ? this.#log!.ping() : false;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#ready.reject(new Error('the log is closed'));
    if (this.#wait) {
      clearTimeout(this.#wait.timer);
      this.#wait.wake();
    }
    // An attempt under way is closed by #connect once it is over, which may take the
    // connecting client's own retries: the close does not wait for it.
    await this.#log?.close();
  }
}
