// The event store port, shaped after EventStoreDB so that the embedded (sqlite)
// adapter and the EventStoreDB adapter are interchangeable. Every adapter must
// pass test/contracts/event-store.contract.ts.

/** 'no_stream': the stream must not exist yet; 'stream_exists': it must; 'any': no check; a number: the revision of the stream's last event. */
export type ExpectedRevision = 'any' | 'no_stream' | 'stream_exists' | number;

export interface NewEvent {
  /** A UUID. Appending an event whose id the stream already holds at the same place is idempotent (as in EventStoreDB). */
  id: string;
  type: string;
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

export interface StoredEvent {
  id: string;
  streamId: string;
  /** 0-based position of the event in its stream. */
  revision: number;
  /** Opaque position in the global order ($all); pass it back as `after` to continue after this event. */
  position: string;
  type: string;
  data: Record<string, unknown>;
  metadata: Record<string, unknown>;
  /** ISO-8601 time the store recorded the event. */
  recordedAt: string;
}

export interface AppendResult {
  /** Revision of the last event written: the expected revision for the next append. */
  nextExpectedRevision: number;
  /** Global position of the last event written. */
  position: string;
}

export interface EventFilter {
  /** Keep events whose stream id starts with one of these. */
  streamPrefixes?: string[];
  /** Keep events whose type starts with one of these. */
  eventTypePrefixes?: string[];
}

export interface ReadAllOptions {
  /** Position of the last event already seen; null or absent reads from the start. */
  after?: string | null;
  /**
   * The last position to read, inclusive: nothing recorded past it is returned, whether or not
   * an event sits at it (positions have gaps). Null or absent: to the end. Like `after`, a
   * position the store did not hand out is refused with a TypeError, and so is one before
   * `after`: a range that ends before it starts is the caller's mistake, not an empty read.
   */
  upTo?: string | null;
  maxCount?: number;
  filter?: EventFilter;
}

export interface Subscription {
  /** Stops delivery; resolves once no handler call is running. */
  stop(): Promise<void>;
}

export interface SubscribeAllOptions {
  after?: string | null;
  filter?: EventFilter;
  /**
   * A read of the store failed (the store went away, a connection dropped, a read was refused):
   * the subscription reads again after `retryInMs`, from the last event it delivered, with a
   * back-off that doubles up to a cap while reads keep failing. Nothing is skipped or repeated.
   */
  onReadFailed?: (error: Error, retryInMs: number) => void;
  /** A read succeeded again after onReadFailed (also when it found no new event). */
  onReadResumed?: () => void;
  /**
   * Called when the subscription ends for good: an error no retry can change (a refused
   * configuration or credentials). It is not called on stop(), nor for failures that are retried.
   */
  onError?: (error: Error) => void;
}

export interface EventStore {
  append(streamId: string, events: NewEvent[], options: { expectedRevision: ExpectedRevision }): Promise<AppendResult>;
  /** Events of one stream in revision order; an empty array when the stream does not exist. */
  readStream(streamId: string, options?: { fromRevision?: number; maxCount?: number }): Promise<StoredEvent[]>;
  /** Events of every stream in global order, after a position. */
  readAll(options?: ReadAllOptions): Promise<StoredEvent[]>;
  /**
   * How many events follow a position in the global order, counted up to `limit` (a follower's
   * lag, such as the forwarder's: the head minus its checkpoint).
   */
  countAfter(after: string | null, limit: number): Promise<number>;
  /**
   * Catch up from `after`, then keep delivering live events, one handler call at a time, in
   * global order. A failed read is retried (onReadFailed); a handler that throws gets the same
   * event again after a back-off.
   */
  subscribeAll(options: SubscribeAllOptions, onEvent: (event: StoredEvent) => Promise<void>): Subscription;
  /** True when the store answers. */
  ping(): Promise<boolean>;
  /**
   * Why the store takes no writes now, as far as it knows, or null: /readyz shows it beside a
   * check its ping failed (the embedded store: its WAL could not be synced, or writes fail on
   * the file, a full disk, until one succeeds). Absent: the store cannot tell.
   */
  writeFailure?(): string | null;
  close(): Promise<void>;
}

export class WrongExpectedRevisionError extends Error {
  readonly streamId: string;
  readonly expected: ExpectedRevision;
  /** Revision of the stream's last event, or 'no_stream'. */
  readonly actual: number | 'no_stream';
  constructor(streamId: string, expected: ExpectedRevision, actual: number | 'no_stream') {
    super(`stream ${streamId}: expected revision ${String(expected)}, actual ${String(actual)}`);
    this.name = 'WrongExpectedRevisionError';
    this.streamId = streamId;
    this.expected = expected;
    this.actual = actual;
  }
}
