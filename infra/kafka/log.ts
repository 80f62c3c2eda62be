// The log port on Apache Kafka through kafkajs. Kafka already has the port's model (keyed
// records, partitions, consumer groups with committed offsets); what this adapter adds is the
// port's delivery discipline on top of kafkajs:
//
// - A record's offset is committed only after its handler resolved, one record at a time.
// - A failing record pauses its partition (the fetch position stays on it, nothing is resolved)
//   and a timer resumes the partition after a capped back-off, so the record comes again and
//   nothing behind it is delivered meanwhile, while the other partitions keep flowing.
// - kafkajs heartbeats only between records; a timer keeps heartbeating while a handler runs,
//   so a slow handler does not cost the member its partitions (the Java client's background
//   heartbeat thread does the same).
// - A consumer kafkajs gives up on (a crash it deems non-retriable) is started again after a
//   back-off, so no error ends a consumer group member for good.
// - A starting consumer first waits for its earlier self to leave the group (see
//   waitForEarlierSelf): kafkajs has neither static membership nor cooperative rebalancing, and
//   a join while a crashed member's session runs out would stop every member for that long.
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, Partitioners, logLevel } from 'kafkajs';
import type { Admin, ConfigResourceTypes, Consumer, ConsumerRunConfig, EachBatchPayload, IHeaders, ISocketFactory, KafkaMessage, LogEntry, MemberDescription, Producer } from 'kafkajs';
import { RecordsTooLargeError, type ConsumeOptions, type ConsumerState, type GroupPartitionOffsets, type Log, type LogConsumer, type LogRecord, type MembershipChange, type OutgoingRecord } from '../ports/log.ts';
import { MAX_EVENT_BYTES } from '../events-topic.ts';
import { checkOutgoingRecords } from '../log-records.ts';
import { defaultInstanceName } from './instance-name.ts';
import { TOPIC_CLEANUP_POLICY, TOPIC_MAX_MESSAGE_BYTES, TOPIC_RETENTION_BYTES, TOPIC_RETENTION_MS, topicConfigEntries } from './topic-config.ts';
// Stops kafkajs's idle request-queue timer loop and its TimeoutNegativeWarning (see there).
import './request-queue-fix.ts';

export interface KafkaLogOptions {
  /** What the Kafka client id starts with; `/` and the instance name follow. Default 'relay'. */
  clientId?: string;
  /**
   * This instance's name, the same across its restarts (RELAY_INSTANCE_ID; a restarted
   * container keeps its pod's host name, a restarted systemd unit its host's): it ends the client
   * id (`relay/<instance>`), which the broker shows for each member of a group, so that a
   * starting consumer recognises the member its crashed predecessor left behind. Instances of
   * one part must have distinct names. Default: the host name.
   */
  instanceId?: string;
  /**
   * How long a member that stopped heartbeating (crashed) keeps its partitions. Default 10 s;
   * the broker refuses values below group.min.session.timeout.ms (6 s by default).
   */
  sessionTimeoutMs?: number;
  /** How often a starting consumer looks whether its earlier self has left the group (waitForEarlierSelf). Default 300 ms. */
  earlierSelfPollMs?: number;
  /** Default 1 s. Members notice a rebalance at their next heartbeat. */
  heartbeatIntervalMs?: number;
  /** How long a rebalance waits for members to rejoin, i.e. for their in-flight handlers. Default 60 s. */
  rebalanceTimeoutMs?: number;
  /** Fetch long-poll. Also bounds how late an idle member notices a rebalance. Default 250 ms. */
  maxWaitTimeMs?: number;
  /** First delay before a failed record is retried; it doubles up to maxRetryDelayMs. Default 100 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
  /**
   * Partitions whose records one consumer handles at the same time (each partition stays
   * serial). Default 8, Relay's events topic's partition count: a handler waiting for a store
   * holds up only its own partition, as in the embedded log.
   */
  partitionsConsumedConcurrently?: number;
  /** kafkajs messages at this level or more severe are logged. Default 'warn'. */
  logLevel?: 'nothing' | 'error' | 'warn' | 'info';
  /**
   * Where kafkajs's lines and this adapter's own go: a process's structured logger. Default:
   * text lines on stderr (`[kafkajs] …`, `[kafka-log] …`), for tools that have no logger.
   */
  logLine?: (line: KafkaLogLine) => void;
  /** How long ping() waits for the cluster. Default 3000 ms. */
  pingTimeoutMs?: number;
  /**
   * max.message.bytes of topics this adapter creates, and the least it accepts of an existing
   * one without a warning. Default TOPIC_MAX_MESSAGE_BYTES, 16 MiB (infra/kafka/topic-config.ts).
   */
  maxMessageBytes?: number;
  /** How the clients open their broker connections (kafkajs's socketFactory, e.g. through a proxy). Default: plain TCP. */
  socketFactory?: ISocketFactory;
}

/** A line of kafkajs's log (repeats held back) or of this adapter's own. */
export interface KafkaLogLine {
  level: 'error' | 'warn' | 'info';
  source: 'kafkajs' | 'kafka-log';
  message: string;
  fields: Record<string, unknown>;
}

interface Settings {
  /** The bootstrap brokers, comma-separated, as the commands in warnings take them. */
  brokers: string;
  logLine: (line: KafkaLogLine) => void;
  /** `relay/<instance>`: every client of this log says it, and each group member's description shows it. */
  clientId: string;
  instanceId: string;
  earlierSelfPollMs: number;
  maxMessageBytes: number;
  sessionTimeoutMs: number;
  heartbeatIntervalMs: number;
  rebalanceTimeoutMs: number;
  maxWaitTimeMs: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  partitionsConsumedConcurrently: number;
  pingTimeoutMs: number;
}

const LOG_LEVELS = { nothing: logLevel.NOTHING, error: logLevel.ERROR, warn: logLevel.WARN, info: logLevel.INFO };

/**
 * Messages that describe normal operation. kafkajs logs every protocol error in a response at
 * error level (a heartbeat told "the group is rebalancing", createTopics on an existing topic)
 * although the calling code handles it: retries, rejoins, or throws it to our caller. And it
 * reports every rebalance at warn level, routine for groups whose members come and go.
 */
function isRoutine(namespace: string, message: string): boolean {
  return (namespace === 'Connection' && message.startsWith('Response ')) || message.startsWith('The group is rebalancing, re-joining');
}

/** How long a message kafkajs repeats (a broker down: every client, every retry) is held back after it was written. */
const REPEAT_WINDOW_MS = 60_000;

const toStderr = ({ level, source, message, fields }: KafkaLogLine): void => {
  const held = typeof fields.heldBack === 'number' ? ` (${fields.heldBack} more like this since it was last written)` : '';
  process.stderr.write(`[${source}] ${level.toUpperCase()} ${message}${held}\n`);
};

function logThrough(logLine: (line: KafkaLogLine) => void): () => (entry: LogEntry) => void {
  // While a broker is down every client logs every retry: each distinct line is written once
  // per minute, with how many like it were held back since (Relay's own log says which part
  // is recovering and when it recovered).
  const lastWritten = new Map<string, { at: number; held: number }>();
  return () => ({ namespace, level, log }: LogEntry) => {
    const { message, error } = log as { message?: unknown; error?: unknown };
    const text = String(message).replace(/Restarting the consumer in \d+ms/, 'Restarting the consumer');
    if (isRoutine(namespace, text)) return;
    const severity = level === logLevel.ERROR ? 'error' : level === logLevel.WARN ? 'warn' : 'info';
    const detail = error !== undefined && !text.includes(String(error)) ? ` (${String(error)})` : '';
    const line = `${namespace}: ${text}${detail}`;
    const now = Date.now();
    const key = `${severity} ${line}`;
    const seen = lastWritten.get(key);
    if (seen && now - seen.at < REPEAT_WINDOW_MS) {
      seen.held++;
      return;
    }
    if (lastWritten.size > 1000) lastWritten.clear();
    lastWritten.set(key, { at: now, held: 0 });
    logLine({ level: severity, source: 'kafkajs', message: line, fields: seen && seen.held > 0 ? { heldBack: seen.held } : {} });
  };
}

/**
 * How much longer than the session timeout a starting consumer waits for a member of its own
 * name to leave: the broker expires a silent member once its session has run out, and removes it
 * at once; past this, the member is alive.
 */
const EARLIER_SELF_MARGIN_MS = 3000;

/**
 * Consumers of this process that are in a group (or joining it), by client id and group: the
 * members of that name are then this process's own, not an earlier one's (several consumers of
 * one group in one process, as tests have). Process-wide: each KafkaLog has a client of its own.
 */
const consumingHere = new Map<string, number>();

/** A retention in days, as people read it (2 decimals at most). */
function days(ms: number): string {
  const d = Math.round((ms / 86_400_000) * 100) / 100;
  return `${d} day${d === 1 ? '' : 's'}`;
}

function describe(error: Error): string {
  return `${error.name}: ${error.message}`;
}

function errorOf(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function nonEmptyString(name: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be a non-empty string`);
}

function headerText(value: IHeaders[string]): string | undefined {
  if (value === undefined) return undefined;
  // A header repeated on the wire arrives as an array; the port has one value per name.
  const last = Array.isArray(value) ? value[value.length - 1] : value;
  return last === undefined ? undefined : last.toString();
}

function toRecord(topic: string, partition: number, message: KafkaMessage): LogRecord {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(message.headers ?? {})) {
    const text = headerText(value);
    if (text !== undefined) headers[name] = text;
  }
  return {
    topic,
    partition,
    offset: message.offset,
    key: message.key?.toString() ?? '',
    value: message.value?.toString() ?? '',
    headers,
  };
}

/** kafkajs's ConfigResourceTypes.TOPIC: its CommonJS module exports the enum in a way Node's named ESM imports do not see. */
const TOPIC_RESOURCE = 2 as ConfigResourceTypes;

/** Kafka's answers to records too large for the topic; kafkajs does not retry them (it may wrap them in another error, as its cause). */
const SIZE_REFUSALS = new Set(['MESSAGE_TOO_LARGE', 'RECORD_LIST_TOO_LARGE']);

function refusedForSize(error: unknown): boolean {
  for (let e = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (SIZE_REFUSALS.has((e as { type?: string }).type ?? '')) return true;
  }
  return false;
}

/** The errors after which kafkajs must rejoin the group before it may commit again. */
function needsRejoin(error: unknown): boolean {
  const type = (error as { type?: unknown } | null)?.type;
  return type === 'REBALANCE_IN_PROGRESS' || type === 'ILLEGAL_GENERATION' || type === 'UNKNOWN_MEMBER_ID' || type === 'NOT_COORDINATOR_FOR_GROUP';
}

export class KafkaLog implements Log {
  readonly #kafka: Kafka;
  readonly #producer: Producer;
  readonly #admin: Admin;
  readonly #settings: Settings;
  readonly #knownTopics = new Set<string>();
  readonly #consumers = new Set<GroupConsumer>();
  #closed = false;

  private constructor(kafka: Kafka, producer: Producer, admin: Admin, settings: Settings) {
    this.#kafka = kafka;
    this.#producer = producer;
    this.#admin = admin;
    this.#settings = settings;
  }

  /** Connects a producer and an admin client; rejects when no broker answers. */
  static async connect(brokers: string[], options: KafkaLogOptions = {}): Promise<KafkaLog> {
    if (!Array.isArray(brokers) || brokers.length === 0) throw new TypeError('at least one Kafka broker address is needed');
    const instanceId = options.instanceId ?? defaultInstanceName();
    nonEmptyString('instanceId', instanceId);
    const settings: Settings = {
      logLine: options.logLine ?? toStderr,
      clientId: `${options.clientId ?? 'relay'}/${instanceId}`,
      instanceId,
      earlierSelfPollMs: options.earlierSelfPollMs ?? 300,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000,
      heartbeatIntervalMs: options.heartbeatIntervalMs ?? 1000,
      rebalanceTimeoutMs: options.rebalanceTimeoutMs ?? 60_000,
      maxWaitTimeMs: options.maxWaitTimeMs ?? 250,
      retryDelayMs: options.retryDelayMs ?? 100,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 5000,
      partitionsConsumedConcurrently: options.partitionsConsumedConcurrently ?? 8,
      pingTimeoutMs: options.pingTimeoutMs ?? 3000,
      maxMessageBytes: options.maxMessageBytes ?? TOPIC_MAX_MESSAGE_BYTES,
      brokers: brokers.join(','),
    };
    const kafka = new Kafka({
      clientId: settings.clientId,
      brokers,
      connectionTimeout: 3000,
      logLevel: LOG_LEVELS[options.logLevel ?? 'warn'],
      logCreator: logThrough(settings.logLine),
      ...(options.socketFactory ? { socketFactory: options.socketFactory } : {}),
    });
    const producer = kafka.producer({
      // Explicit, so kafkajs does not warn about its v2 partitioner change: murmur2 like the
      // Java client (and infra/sqlite/partitioner.ts), so one key always lands in one partition.
      createPartitioner: Partitioners.DefaultPartitioner,
      // Retries cannot duplicate or reorder records; one request in flight keeps publish order.
      // kafkajs then retries without limit, so in a broker outage publish() waits for the broker
      // instead of failing (what the forwarder wants: it cannot move on without the ack anyway).
      idempotent: true,
      maxInFlightRequests: 1,
      // A typo'd topic is an error, as in the sqlite log, not a new one-partition topic.
      allowAutoTopicCreation: false,
    });
    const admin = kafka.admin();
    try {
      await producer.connect();
      await admin.connect();
    } catch (error) {
      await Promise.allSettled([producer.disconnect(), admin.disconnect()]);
      throw error;
    }
    return new KafkaLog(kafka, producer, admin, settings);
  }

  /**
   * Creates the topic with the configuration of infra/kafka/topic-config.ts: every record kept
   * (retention.ms and retention.bytes -1, cleanup.policy delete) and records as large as Relay's
   * events. Like Kafka's createTopics, an existing topic is left as it is: one that differs from
   * what Relay would create (its partition count, a smaller record limit, records deleted after a
   * time or size, compaction) is said at warn, with the command that changes it, and never changed:
   * the topic is the operator's.
   */
  async ensureTopic(topic: string, partitions: number): Promise<void> {
    this.#assertOpen();
    nonEmptyString('topic', topic);
    if (!Number.isInteger(partitions) || partitions < 1) throw new TypeError(`partitions must be an integer >= 1, got ${String(partitions)}`);
    // Resolves once the partitions have leaders; false (not an error) when the topic exists.
    const created = await this.#admin.createTopics({
      topics: [{ topic, numPartitions: partitions, configEntries: topicConfigEntries(this.#settings.maxMessageBytes) }],
      waitForLeaders: true,
    });
    this.#knownTopics.add(topic);
    if (!created) {
      await this.#warnIfPartitionsDiffer(topic, partitions);
      await this.#warnIfConfigDiffers(topic, this.#settings.maxMessageBytes);
    }
  }

  /**
   * A topic that existed before (made by hand, or by a consumer that subscribed to it before
   * Relay first started: Kafka's clients ask brokers to create the topics they subscribe to,
   * and brokers do by default, with their num.partitions) keeps its partition count, which bounds
   * how many instances of each consumer group get records.
   */
  async #warnIfPartitionsDiffer(topic: string, expected: number): Promise<void> {
    const { logLine, brokers } = this.#settings;
    let actual: number;
    try {
      const { topics } = await this.#admin.fetchTopicMetadata({ topics: [topic] });
      actual = topics.find((t) => t.name === topic)?.partitions.length ?? 0;
    } catch (error) {
      logLine({ level: 'warn', source: 'kafka-log', message: `could not read the partitions of topic ${topic} (${describe(errorOf(error))}); it should have ${expected}`, fields: { topic, expectedPartitions: expected } });
      return;
    }
    if (actual === expected || actual === 0) return;
    const partitionsOf = (n: number) => `${n} partition${n === 1 ? '' : 's'}`;
    const meaning = actual < expected
      ? `each consumer group (each processor's, each analyst's) shares ${partitionsOf(actual)}: at most ${actual} of its instances handle records, the others none; ` +
        `and a record whose handler keeps failing holds up, while it is retried, ${actual === 1 ? 'every record behind it' : `the records behind it in its partition (1/${actual} of all)`}. ` +
        `While the topic holds no record, grow it: kafka-topics.sh --bootstrap-server ${brokers} --alter --topic ${topic} --partitions ${expected} ` +
        '(with records in it, new partitions send the later events of a stream to another partition than its earlier ones, out of order)'
      : `up to ${actual} instances of each consumer group share them, more than the ${expected} the documentation counts on; nothing else changes`;
    logLine({
      level: 'warn', source: 'kafka-log', fields: { topic, partitions: actual, expectedPartitions: expected },
      message: `topic ${topic} has ${partitionsOf(actual)}, not the ${expected} Relay creates it with (it existed already: made by hand, or auto-created by a consumer ` +
        `that subscribed before Relay first started, with the broker's num.partitions); Relay does not change it: ${meaning}`,
    });
  }

  /**
   * A topic created elsewhere (by hand, by an older Relay, by a consumer's auto-creation) has
   * the broker's defaults: a 1 MB record limit, smaller than Relay's events may need (the
   * forwarder would be refused the large ones, and could not go past them), and records deleted
   * after 7 days, while analysts are told to read every event from the beginning. Only said,
   * never changed: the topic is the operator's.
   */
  async #warnIfConfigDiffers(topic: string, needed: number): Promise<void> {
    const { logLine, brokers } = this.#settings;
    const names = ['max.message.bytes', 'retention.ms', 'retention.bytes', 'cleanup.policy'];
    let config: Map<string, string>;
    try {
      const { resources } = await this.#admin.describeConfigs({ includeSynonyms: false, resources: [{ type: TOPIC_RESOURCE, name: topic, configNames: names }] });
      config = new Map((resources[0]?.configEntries ?? []).map((e) => [e.configName, e.configValue]));
    } catch (error) {
      logLine({
        level: 'warn', source: 'kafka-log', fields: { topic },
        message: `could not read the configuration of topic ${topic} (${describe(errorOf(error))}); it needs max.message.bytes of at least ${needed}, ` +
          `and should keep every record (retention.ms=${TOPIC_RETENTION_MS}, retention.bytes=${TOPIC_RETENTION_BYTES}, cleanup.policy=${TOPIC_CLEANUP_POLICY})`,
      });
      return;
    }
    const alter = `kafka-configs.sh --bootstrap-server ${brokers} --alter --entity-type topics --entity-name ${topic} --add-config`;

    const value = config.get('max.message.bytes');
    const limit = Number(value);
    if (value === undefined || !Number.isFinite(limit) || limit < needed) {
      logLine({
        level: 'warn', source: 'kafka-log', fields: { topic, maxMessageBytes: value ?? null },
        message: `topic ${topic} has max.message.bytes ${value ?? 'unknown'}, below the ${needed} Relay needs (an email's event may be up to ${MAX_EVENT_BYTES} bytes): ` +
          `larger records will be refused and the forwarder cannot go past them; raise it (${alter} max.message.bytes=${needed})`,
      });
    }

    // What makes the topic lose records: a time bound, a size bound, compaction.
    const bounds: string[] = [];
    const lifts: string[] = [];
    const retentionMs = config.get('retention.ms');
    if (retentionMs !== undefined && Number(retentionMs) >= 0) {
      bounds.push(`retention.ms=${retentionMs}: records are deleted after ${days(Number(retentionMs))}`);
      lifts.push(`retention.ms=${TOPIC_RETENTION_MS}`);
    }
    const retentionBytes = config.get('retention.bytes');
    if (retentionBytes !== undefined && Number(retentionBytes) >= 0) {
      bounds.push(`retention.bytes=${retentionBytes}: a partition's oldest records are deleted past that size`);
      lifts.push(`retention.bytes=${TOPIC_RETENTION_BYTES}`);
    }
    const policy = config.get('cleanup.policy');
    if (policy !== undefined && policy.split(',').map((p) => p.trim()).includes('compact')) {
      bounds.push(`cleanup.policy=${policy}: compaction keeps only the last event of each stream (the record key)`);
      lifts.push(`cleanup.policy=${TOPIC_CLEANUP_POLICY}`);
    }
    if (bounds.length === 0) return;
    logLine({
      level: 'warn', source: 'kafka-log', fields: { topic, retentionMs: retentionMs ?? null, retentionBytes: retentionBytes ?? null, cleanupPolicy: policy ?? null },
      message: `topic ${topic} does not keep every record (${bounds.join('; ')}), unlike the topic Relay creates and the event catalog describes: ` +
        `a consumer group that starts from the beginning later, or is down for longer, silently misses what was deleted meanwhile; ` +
        `Relay does not change it: lift it with ${alter} ${lifts.join(',')}`,
    });
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    this.#assertOpen();
    nonEmptyString('topic', topic);
    checkOutgoingRecords(records);
    if (records.length === 0) return;
    await this.#assertTopicExists(topic);
    try {
      await this.#producer.send({
        topic,
        // -1: every in-sync replica has the records before send() resolves.
        acks: -1,
        messages: records.map((r) => ({ key: r.key, value: r.value, headers: { ...r.headers } })),
      });
    } catch (error) {
      if (refusedForSize(error)) throw new RecordsTooLargeError(`${topic}: ${errorOf(error).message}`, { cause: error });
      throw error;
    }
  }

  async consume(options: ConsumeOptions): Promise<LogConsumer> {
    this.#assertOpen();
    nonEmptyString('group', options.group);
    nonEmptyString('topic', options.topic);
    if (typeof options.handle !== 'function') throw new TypeError('handle must be a function');
    await this.#assertTopicExists(options.topic);
    const members = async (group: string): Promise<MemberDescription[]> => {
      const { groups } = await this.#admin.describeGroups([group]);
      return groups.find((g) => g.groupId === group)?.members ?? [];
    };
    const consumer = new GroupConsumer(this.#kafka, this.#settings, options, members, () => this.#consumers.delete(consumer));
    this.#consumers.add(consumer);
    try {
      await consumer.start();
    } catch (error) {
      await consumer.stop();
      throw error;
    }
    return consumer;
  }

  async groupOffsets(topic: string, groups: readonly string[]): Promise<GroupPartitionOffsets[]> {
    this.#assertOpen();
    nonEmptyString('topic', topic);
    await this.#assertTopicExists(topic);
    const [bounds, committed] = await Promise.all([
      this.#admin.fetchTopicOffsets(topic),
      Promise.all(groups.map((groupId) => this.#admin.fetchOffsets({ groupId, topics: [topic] }))),
    ]);
    bounds.sort((a, b) => a.partition - b.partition);
    return groups.flatMap((group, i) => {
      // -1: the group has committed nothing on that partition.
      const byPartition = new Map((committed[i].find((t) => t.topic === topic)?.partitions ?? []).map((p) => [p.partition, p.offset]));
      return bounds.map(({ partition, low, high }) => {
        const offset = byPartition.get(partition);
        return { group, partition, start: low, end: high, committed: offset === undefined || offset === '-1' ? null : offset };
      });
    });
  }

  async ping(): Promise<boolean> {
    if (this.#closed) return false;
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#settings.pingTimeoutMs);
      timer.unref();
    });
    // kafkajs keeps retrying an unreachable broker well past the timeout; the late outcome is dropped.
    const answer = this.#admin.describeCluster().then(
      (cluster) => cluster.brokers.length > 0,
      () => false,
    );
    try {
      return await Promise.race([answer, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Stops every consumer (each finishes its in-flight handler and commits), then disconnects. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.allSettled([...this.#consumers].map((c) => c.stop()));
    await Promise.allSettled([this.#producer.disconnect(), this.#admin.disconnect()]);
  }

  async #assertTopicExists(topic: string): Promise<void> {
    if (this.#knownTopics.has(topic)) return;
    const topics = await this.#admin.listTopics();
    for (const name of topics) this.#knownTopics.add(name);
    if (!this.#knownTopics.has(topic)) throw new Error(`topic "${topic}" does not exist; create it with ensureTopic()`);
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('the log is closed');
  }
}

/** The longest wait before a consumer kafkajs gave up on is started again. */
const MAX_RESTART_DELAY_MS = 30_000;

class GroupConsumer implements LogConsumer {
  readonly #consumer: Consumer;
  readonly #settings: Settings;
  readonly #options: ConsumeOptions;
  readonly #onStopped: () => void;
  readonly #runConfig: ConsumerRunConfig;
  /** Current retry delay of partitions whose last record failed. */
  readonly #backoff = new Map<number, number>();
  readonly #resumeTimers = new Set<NodeJS.Timeout>();
  #stopping = false;
  #stopped: Promise<void> | undefined;
  #memberId: string | null = null;
  #state: ConsumerState = 'running';
  /** Wait before the next restart of a consumer kafkajs gave up on; back to retryDelayMs once a fetch succeeds. */
  #restartDelay: number;
  #restartTimer: NodeJS.Timeout | undefined;
  /** A restart under way (it never rejects); stop() waits for it rather than racing it. */
  #restarting: Promise<void> | undefined;
  readonly #members: (group: string) => Promise<MemberDescription[]>;
  /** The wait for an earlier self to leave (it never rejects); stop() ends it and waits for it. */
  #waiting: Promise<void> | undefined;
  readonly #abortWait = new AbortController();
  /** This consumer's key in consumingHere, once counted there. */
  #countedAs: string | null = null;

  constructor(kafka: Kafka, settings: Settings, options: ConsumeOptions, members: (group: string) => Promise<MemberDescription[]>, onStopped: () => void) {
    this.#settings = settings;
    this.#options = options;
    this.#members = members;
    this.#onStopped = onStopped;
    this.#restartDelay = settings.retryDelayMs;
    this.#runConfig = {
      autoCommit: false,
      // Nothing is resolved behind the handler's back: the fetch position of a partition only
      // moves past a record once it was handled and committed.
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: settings.partitionsConsumedConcurrently,
      eachBatch: (payload) => this.#eachBatch(payload),
    };
    this.#consumer = kafka.consumer({
      groupId: options.group,
      sessionTimeout: settings.sessionTimeoutMs,
      heartbeatInterval: settings.heartbeatIntervalMs,
      rebalanceTimeout: settings.rebalanceTimeoutMs,
      maxWaitTimeInMs: settings.maxWaitTimeMs,
      allowAutoTopicCreation: false,
    });
    this.#consumer.on(this.#consumer.events.CRASH, ({ payload }) => {
      if (this.#stopping) return;
      this.#setState('recovering', payload.error);
      // kafkajs restarts the consumer itself after a crash it deems retriable. After any other
      // (e.g. "Failed to find group coordinator" when a broker restarts mid-request) it has
      // disconnected and never starts it again; the subscription is kept, so run() restarts it.
      if (!payload.restart) this.#restartLater(`crashed on an error kafkajs does not retry (${describe(payload.error)})`);
    });
    // A fetch that came back means the consumer works again after a crash it restarted from.
    this.#consumer.on(this.#consumer.events.FETCH, () => {
      this.#restartDelay = this.#settings.retryDelayMs;
      this.#setState('running');
    });
    // Every (re)join of the group ends with an assignment: the first one is the join.
    this.#consumer.on(this.#consumer.events.GROUP_JOIN, ({ payload }) => {
      const partitions = [...(payload.memberAssignment[options.topic] ?? [])].sort((a, b) => a - b);
      const change = this.#memberId === null ? 'joined' : 'assigned';
      this.#memberId = payload.memberId;
      this.#tell(change, partitions);
    });
  }

  #setState(state: ConsumerState, error?: Error): void {
    if (state === this.#state) return;
    this.#state = state;
    try {
      this.#options.onState?.(state, error);
    } catch {
      // A failing callback must not stop the consumer.
    }
  }

  #tell(change: MembershipChange['change'], partitions: number[]): void {
    try {
      this.#options.onMembership?.({ change, group: this.#options.group, topic: this.#options.topic, memberId: this.#memberId ?? '', partitions });
    } catch {
      // A failing callback must not stop the consumer.
    }
  }

  /** Resolves once the consumer joined the group and received its first assignment. */
  async start(): Promise<void> {
    const waiting = this.#waitForEarlierSelf();
    this.#waiting = waiting;
    await waiting;
    if (this.#stopping) throw new Error(`the consumer of group ${this.#options.group} was stopped before it joined`);
    await this.#consumer.connect();
    await this.#consumer.subscribe({ topics: [this.#options.topic], fromBeginning: this.#options.fromBeginning ?? true });
    await this.#consumer.run(this.#runConfig);
  }

  /**
   * An instance killed (SIGKILL, an OOM kill) and started again at once, as supervisors do,
   * finds the member it was still in the group: nobody left it, and the broker keeps it until its
   * session runs out. Joining then would start a rebalance in which, under kafkajs's eager
   * protocol, every other member gives up its partitions, and the broker holds that rebalance
   * until the dead member's session ends: the whole group would handle nothing meanwhile.
   * Waiting for that member to leave first keeps the others on their partitions, and only the
   * dead member's partitions wait for the session timeout, as they would without the restart.
   *
   * The earlier member is told by the client id, which ends with the instance name. The wait
   * ends when no member of this name is left, when no other member is left (nobody whose
   * partitions a join would stop: the broker then holds the join as before), or after the
   * session timeout and a margin: a member of this name that stays is alive, another process
   * under the same name (a warning says to set RELAY_INSTANCE_ID), and it joins anyway. A
   * group whose members cannot be read (the broker down) is joined without waiting. Never rejects.
   */
  async #waitForEarlierSelf(): Promise<void> {
    const { group, topic } = this.#options;
    const { clientId, instanceId, sessionTimeoutMs, earlierSelfPollMs, logLine } = this.#settings;
    const key = `${clientId}\u0000${group}`;
    const here = consumingHere.get(key) ?? 0;
    consumingHere.set(key, here + 1);
    this.#countedAs = key;
    // Members of this name may be this process's own consumers of the group.
    if (here > 0) return;
    const boundMs = sessionTimeoutMs + EARLIER_SELF_MARGIN_MS;
    const startedAt = Date.now();
    const fields = { group, topic, instance: instanceId };
    let waited = false;
    for (;;) {
      if (this.#stopping) return;
      let members: MemberDescription[];
      try {
        members = await this.#membersWithin(Math.max(startedAt + boundMs - Date.now(), earlierSelfPollMs));
      } catch (error) {
        if (this.#stopping) return;
        logLine({ level: 'warn', source: 'kafka-log', fields, message: `group ${group}: could not read its members (${describe(errorOf(error))}); joining without looking for an earlier member named ${instanceId}` });
        return;
      }
      if (this.#stopping) return;
      const earlier = members.filter((m) => m.clientId === clientId);
      const others = members.length - earlier.length;
      const elapsed = Date.now() - startedAt;
      if (earlier.length === 0 || others === 0) {
        if (waited) {
          logLine({
            level: 'info', source: 'kafka-log', fields: { ...fields, waitedMs: elapsed },
            message: earlier.length === 0
              ? `group ${group}: the earlier member named ${instanceId} left after ${elapsed} ms; joining`
              : `group ${group}: no other member is left whose partitions a join would stop; joining`,
          });
        }
        return;
      }
      if (elapsed >= boundMs) {
        logLine({
          level: 'warn', source: 'kafka-log', fields: { ...fields, waitedMs: elapsed, memberIds: earlier.map((m) => m.memberId) },
          message: `group ${group}: a member named ${instanceId}, this instance's name, is still in the group after ${elapsed} ms, past the session timeout (${sessionTimeoutMs} ms): ` +
            `it is alive, so another process runs under the same name; joining anyway. Give each instance of a part a name of its own: set RELAY_INSTANCE_ID (instances on one host share its host name)`,
        });
        return;
      }
      if (!waited) {
        waited = true;
        logLine({
          level: 'info', source: 'kafka-log', fields: { ...fields, memberIds: earlier.map((m) => m.memberId), otherMembers: others, waitMs: boundMs },
          message: `group ${group}: a member named ${instanceId}, this instance's name, is still in the group (this instance before a crash or kill, whose session has not run out); ` +
            `waiting for it to leave, at most ${boundMs} ms, before joining, so that the other members keep their partitions meanwhile`,
        });
      }
      try {
        await sleep(Math.max(1, Math.min(earlierSelfPollMs, startedAt + boundMs - Date.now())), undefined, { signal: this.#abortWait.signal });
      } catch {
        return; // stop()
      }
    }
  }

  /**
   * The group's members; an error once `ms` passed without an answer (kafkajs retries a broker
   * that is down for longer) or once stop() came.
   */
  async #membersWithin(ms: number): Promise<MemberDescription[]> {
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const givenUp = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the broker did not answer within ${ms} ms`)), ms);
      onAbort = () => reject(new Error('stopped'));
      this.#abortWait.signal.addEventListener('abort', onAbort, { once: true });
    });
    const answer = this.#members(this.#options.group);
    answer.catch(() => {}); // an answer that comes after the timeout
    try {
      return await Promise.race([answer, givenUp]);
    } finally {
      clearTimeout(timer);
      this.#abortWait.signal.removeEventListener('abort', onAbort!);
    }
  }

  /** what: what happened to the consumer, for the log line. */
  #restartLater(what: string): void {
    const delay = this.#restartDelay;
    this.#restartDelay = Math.min(delay * 2, MAX_RESTART_DELAY_MS);
    const { group, topic } = this.#options;
    this.#settings.logLine({ level: 'warn', source: 'kafka-log', message: `consumer of group ${group} on ${topic} ${what}; restarting it in ${delay} ms`, fields: { group, topic } });
    clearTimeout(this.#restartTimer);
    this.#restartTimer = setTimeout(() => {
      this.#restartTimer = undefined;
      const restarting = this.#restart().finally(() => {
        if (this.#restarting === restarting) this.#restarting = undefined;
      });
      this.#restarting = restarting;
    }, delay);
  }

  async #restart(): Promise<void> {
    if (this.#stopping) return;
    try {
      await this.#consumer.connect();
      if (this.#stopping) return;
      // Resolves once the member joined, or once kafkajs crashed again (CRASH then says whether
      // it restarts by itself or this consumer does).
      await this.#consumer.run(this.#runConfig);
    } catch (error) {
      if (!this.#stopping) this.#restartLater(`could not be restarted (${describe(errorOf(error))})`);
    }
  }

  stop(): Promise<void> {
    this.#stopped ??= (async () => {
      this.#stopping = true;
      this.#abortWait.abort();
      clearTimeout(this.#restartTimer);
      for (const timer of this.#resumeTimers) clearTimeout(timer);
      this.#resumeTimers.clear();
      try {
        // A wait for an earlier self ends at once; start() then joins nothing.
        await this.#waiting;
        // A restart under way ends first: stopping kafkajs while it joins would leave it running.
        await this.#restarting;
        // Waits for the running eachBatch (whose handler commits on its own), then leaves the
        // group, so the partitions are reassigned at once instead of after the session timeout.
        await this.#consumer.stop();
        await this.#consumer.disconnect();
        if (this.#memberId !== null) this.#tell('left', []);
      } finally {
        if (this.#countedAs !== null) {
          const left = (consumingHere.get(this.#countedAs) ?? 1) - 1;
          if (left > 0) consumingHere.set(this.#countedAs, left);
          else consumingHere.delete(this.#countedAs);
          this.#countedAs = null;
        }
        this.#onStopped();
      }
    })();
    return this.#stopped;
  }

  async #eachBatch({ batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale, pause }: EachBatchPayload): Promise<void> {
    const { topic, partition } = batch;
    for (const message of batch.messages) {
      if (this.#stopping || !isRunning() || isStale()) return;
      const record = toRecord(topic, partition, message);
      const { failure, rejoin } = await this.#handle(record, heartbeat);
      if (failure) {
        try {
          this.#options.onHandlerError?.(failure, record);
        } catch {
          // A failing error callback must not stop delivery.
        }
        // Stopping: leave the record uncommitted for whoever gets the partition next.
        if (this.#stopping || !isRunning()) return;
        this.#retryLater(partition, pause);
        if (rejoin) throw rejoin;
        return;
      }
      const next = (BigInt(message.offset) + 1n).toString();
      // Straight to the coordinator, even while stop() is waiting for this batch: kafkajs's own
      // consumer.commitOffsets() silently skips commits once the consumer is stopping.
      await commitOffsetsIfNecessary({ topics: [{ topic, partitions: [{ partition, offset: next }] }] });
      resolveOffset(message.offset);
      this.#backoff.delete(partition);
      // Handing the partition over now beats delivering more records whose commits would be refused.
      if (rejoin) throw rejoin;
      await heartbeat();
    }
  }

  /** Runs the handler, heartbeating meanwhile; reports a rebalance noticed on the way. */
  async #handle(record: LogRecord, heartbeat: () => Promise<void>): Promise<{ failure?: Error; rejoin?: Error }> {
    let rejoin: Error | undefined;
    const timer = setInterval(() => {
      heartbeat().catch((error: unknown) => {
        if (needsRejoin(error)) rejoin ??= errorOf(error);
      });
    }, this.#settings.heartbeatIntervalMs);
    try {
      await this.#options.handle(record);
      return { rejoin };
    } catch (error) {
      return { failure: errorOf(error), rejoin };
    } finally {
      clearInterval(timer);
    }
  }

  /**
   * Pausing keeps the partition out of the following fetches while the others go on; since the
   * failed record was not resolved, the fetch after resume starts with it again.
   */
  #retryLater(partition: number, pause: () => () => void): void {
    const delay = this.#backoff.get(partition) ?? this.#settings.retryDelayMs;
    this.#backoff.set(partition, Math.min(delay * 2, this.#settings.maxRetryDelayMs));
    const resume = pause();
    const timer = setTimeout(() => {
      this.#resumeTimers.delete(timer);
      if (!this.#stopping) resume();
    }, delay);
    this.#resumeTimers.add(timer);
  }
}
