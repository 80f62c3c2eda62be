// The message log port, shaped after Kafka: topics split into partitions, records
// keyed (one key always lands in one partition, so per-key order holds), and named
// consumer groups that each keep their own committed offsets. Every adapter must
// pass test/contracts/log.contract.ts.

export interface OutgoingRecord {
  key: string;
  value: string;
  headers?: Record<string, string>;
}

export interface LogRecord {
  topic: string;
  partition: number;
  /** Decimal offset within the partition. */
  offset: string;
  key: string;
  value: string;
  headers: Record<string, string>;
}

export interface ConsumeOptions {
  group: string;
  topic: string;
  /**
   * Called for each record, in order per partition. The offset is committed only after it
   * resolves; when it throws, the same record is retried (after a back-off) and nothing
   * behind it in the partition is delivered meanwhile. Delivery is at-least-once: handlers
   * must be idempotent. Records of different partitions may be handled at the same time (a
   * handler waiting on one partition does not hold up the others).
   *
   * A log may run the handlers of one fetch in one deferred-durability scope (./durability.ts,
   * as the embedded log does): their writes then settle as soon as they take effect, and the
   * offsets are committed only once those writes are durable. A handler whose next step must
   * not happen before its writes are durable (one store's write before another's) awaits
   * durableSoFar() first.
   */
  handle: (record: LogRecord) => Promise<void>;
  /**
   * The event types the handler wants, by each record's `event-type` header. A log may leave
   * out records whose header names another type (not reading them further, still moving the
   * group's offset past them); a record without the header is always handed over. Absent:
   * every record. The offsets of records left out may be committed later than those of
   * handled ones (after a crash the log leaves them out again).
   */
  types?: readonly string[];
  /**
   * Told how many records a log left out (`types`) as it moves past them: they are progress
   * the handler never sees. A log that hands every record over never calls it.
   */
  onPassedOver?: (records: number) => void;
  /** Where a group with no committed offset starts. Default 'earliest'. */
  fromBeginning?: boolean;
  /** Told about handler failures (the record will be retried). */
  onHandlerError?: (error: Error, record: LogRecord) => void;
  /** Told when this consumer joins its group, when the partitions it owns change, and when it leaves. */
  onMembership?: (change: MembershipChange) => void;
  /**
   * Told when the consumer cannot fetch or commit (the broker or the database went away, a
   * read failed): `recovering`, while it retries with a back-off from its committed offsets;
   * `running` once it can again; `stopped` when it ended for good on an error it does not retry
   * (not on stop()). Neither adapter ends a consumer on its own: the Kafka adapter restarts, after
   * a back-off, a consumer kafkajs gave up on, and says `recovering` meanwhile.
   */
  onState?: (state: ConsumerState, error?: Error) => void;
}

export type ConsumerState = 'running' | 'recovering' | 'stopped';

export interface MembershipChange {
  /** joined: became a member; assigned: owns `partitions` now (after a rebalance); left: left the group. */
  change: 'joined' | 'assigned' | 'left';
  group: string;
  topic: string;
  /** This consumer's member id in the group. */
  memberId: string;
  /** The partitions this consumer owns after the change, ascending. */
  partitions: number[];
}

/** Where one consumer group stands on one partition. */
export interface GroupPartitionOffsets {
  group: string;
  partition: number;
  /** Offset of the oldest record still kept (retention removes older ones). */
  start: string;
  /** Offset the next record published to the partition gets (Kafka's high watermark). */
  end: string;
  /** The group's committed offset, i.e. the next record it will handle; null while it has committed none. */
  committed: string | null;
}

/**
 * Records of the partition the group has not handled yet: end − max(committed ?? start, start).
 * A group behind the oldest kept record continues there (as a Kafka consumer reset to earliest).
 */
export function partitionLag(o: GroupPartitionOffsets): number {
  const start = Number(o.start);
  return Math.max(0, Number(o.end) - Math.max(start, o.committed === null ? start : Number(o.committed)));
}

export interface LogConsumer {
  /** Stops fetching, lets the in-flight handler finish, commits, and leaves the group. */
  stop(): Promise<void>;
}

/**
 * A publish the log refused for its size (Kafka: a record, or one partition's records of the
 * request together, over the topic's max.message.bytes). Records of other partitions may have
 * been written, as with any failed publish; the same records will be refused again: fewer at a
 * time may pass, a single one never will.
 */
export class RecordsTooLargeError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'RecordsTooLargeError';
  }
}

export interface Log {
  /** Creates the topic if it does not exist. */
  ensureTopic(topic: string, partitions: number): Promise<void>;
  /**
   * Appends records; resolves once the log has durably acknowledged all of them. Throws
   * RecordsTooLargeError when it refuses them for their size.
   */
  publish(topic: string, records: OutgoingRecord[]): Promise<void>;
  /** Joins a consumer group; several consumers of one group share the topic's partitions. */
  consume(options: ConsumeOptions): Promise<LogConsumer>;
  /**
   * Read-only: each group's committed offset and each partition's start and end, for every
   * partition of the topic (a group's lag on a partition is end − max(committed ?? start, start)).
   */
  groupOffsets(topic: string, groups: readonly string[]): Promise<GroupPartitionOffsets[]>;
  /**
   * True when the topic's records are the event store's own events, in the partitions their
   * keys give and in commit order, without anyone publishing them (the embedded log in the
   * event store's file: infra/sqlite/event-partitions.ts): the forwarder has nothing to do.
   * Absent or false: the forwarder publishes them (Kafka, or an embedded log in another file).
   */
  followsEventStore?(topic: string): boolean;
  ping(): Promise<boolean>;
  close(): Promise<void>;
}
