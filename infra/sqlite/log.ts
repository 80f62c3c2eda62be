// The embedded log: Kafka's model (partitioned topics, per-group committed offsets, consumer
// groups that share partitions) in sqlite tables, so several processes can share one file.
//
// Group coordination has no broker: each member keeps a row with a lease (expires_at) that a
// timer renews, and every member computes the same round-robin assignment from the live
// member rows. A member claims a partition only when it is the partition's desired owner and
// the recorded owner is gone (left or lease expired); an owner hands a partition over by
// deleting its ownership row between two records, i.e. after its in-flight handler finished
// and its offset was committed. A member that dies without stop() keeps its partitions until
// its lease runs out. Commits check ownership in the same transaction, so a member that
// stalled past its lease cannot commit over the member that took its partition. A consumer
// writes the offsets of every partition a round moved in one write, and those of records it
// only passed over (ConsumeOptions.types) lazily (PASSED_OVER_COMMIT_MS).
//
// In the event store's own file, the events topic can be a view (option eventsTopic): its
// records are es_events' rows, in the partitions and at the offsets each append gave them
// (./event-partitions.ts), so nothing copies them here; records published to it (a parked
// event sent again) are kept here at offsets of the same counter and read in between.
// Retention never deletes the events: only records kept here are pruned.
import { randomUUID } from 'node:crypto';
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import type { ConsumeOptions, ConsumerState, GroupPartitionOffsets, Log, LogConsumer, LogRecord, MembershipChange, OutgoingRecord } from '../ports/log.ts';
import { Backoff, sleep } from '../retry.ts';
import { deferDurability, type DurabilityScope } from '../ports/durability.ts';
import { changeSignal, notifyOnceCommitted, waitForChange } from './change-signal.ts';
import type { ChangeSignal } from './change-signal.ts';
import { connect, type ConnectOptions, type SqliteConnections } from './connections.ts';
import type { GroupCommit } from './group-commit.ts';
import { partitionForKey } from './partitioner.ts';
import { checkOutgoingRecords } from '../log-records.ts';
import { eventRecordRows, eventRowRecord, eventsAppended, PartitionCounter, prepareViewReads, type EventRecordRow } from './event-partitions.ts';

export interface SqliteLogOptions extends ConnectOptions {
  /** How often idle consumers look for records and members of other processes. Default 150 ms. */
  pollIntervalMs?: number;
  /** How long a consumer that stopped heartbeating (crashed) keeps its partitions. Default 10 s, as Kafka's session.timeout.ms. */
  sessionTimeoutMs?: number;
  /** First delay before a failed record is retried; it doubles up to maxRetryDelayMs. Default 100 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
  /** Records fetched per query. Default 100. */
  batchSize?: number;
  /**
   * Records older than this are deleted, as Kafka's log.retention.ms (default 7 days, as
   * Kafka's); a group that had not read them yet continues at the oldest kept record, as a
   * Kafka consumer reset to earliest. 0 keeps everything.
   */
  retentionMs?: number;
  /**
   * The topic whose records are the event store's events (this file must hold the event
   * store): made so when it does not exist yet. A topic that exists as the log's own keeps its
   * records, and the forwarder keeps copying into it.
   */
  eventsTopic?: string;
}

/** How often a log with retention looks for records past it. */
const PRUNE_EVERY_MS = 10 * 60_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS log_topics (
  topic      TEXT    PRIMARY KEY,
  partitions INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_records (
  topic         TEXT    NOT NULL,
  partition     INTEGER NOT NULL,
  record_offset INTEGER NOT NULL,
  key           TEXT    NOT NULL,
  value         TEXT    NOT NULL,
  headers       TEXT    NOT NULL,
  appended_at   TEXT    NOT NULL,
  PRIMARY KEY (topic, partition, record_offset)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS log_records_appended_at ON log_records (appended_at);
-- Each partition's next offset, kept by publish: consumers learn in one query which
-- partitions have records for them instead of fetching from every partition.
CREATE TABLE IF NOT EXISTS log_partition_ends (
  topic       TEXT    NOT NULL,
  partition   INTEGER NOT NULL,
  next_offset INTEGER NOT NULL,
  PRIMARY KEY (topic, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_committed_offsets (
  group_id    TEXT    NOT NULL,
  topic       TEXT    NOT NULL,
  partition   INTEGER NOT NULL,
  next_offset INTEGER NOT NULL,
  PRIMARY KEY (group_id, topic, partition)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_group_members (
  group_id   TEXT    NOT NULL,
  topic      TEXT    NOT NULL,
  member_id  TEXT    NOT NULL,
  expires_at INTEGER NOT NULL,
  PRIMARY KEY (group_id, topic, member_id)
) WITHOUT ROWID;
-- Topics whose records are es_events' rows (view topics): their partition count is es_partition_ends'.
CREATE TABLE IF NOT EXISTS log_views (
  topic TEXT PRIMARY KEY
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS log_partition_owners (
  group_id  TEXT    NOT NULL,
  topic     TEXT    NOT NULL,
  partition INTEGER NOT NULL,
  member_id TEXT    NOT NULL,
  PRIMARY KEY (group_id, topic, partition)
) WITHOUT ROWID;
`;

interface RecordRow {
  record_offset: number;
  key: string;
  value: string;
  headers: string;
}

/** A row of a view topic: one of the log's own records, or an event (value null). */
type ViewRow = RecordRow | (EventRecordRow & { value: null });

function recordOf(topic: string, partition: number, row: RecordRow | ViewRow): LogRecord {
  if (row.value === null) return eventRowRecord(topic, partition, row as EventRecordRow);
  return { topic, partition, offset: String(row.record_offset), key: row.key, value: row.value, headers: JSON.parse(row.headers) };
}

/** Files written before log_partition_ends existed get their ends from the records. */
const BACKFILL_ENDS = `
INSERT OR IGNORE INTO log_partition_ends (topic, partition, next_offset)
  SELECT topic, partition, max(record_offset) + 1 FROM log_records
  WHERE NOT EXISTS (SELECT 1 FROM log_partition_ends) GROUP BY topic, partition`;

/**
 * The records retention deletes (pruneBefore), `?` the cutoff: each partition's last record
 * stays, except a view topic's, whose next offsets are the event store's counter's.
 */
const PRUNABLE = `appended_at < ? AND (record_offset <
  (SELECT max(m.record_offset) FROM log_records m WHERE m.topic = log_records.topic AND m.partition = log_records.partition)
  OR topic IN (SELECT topic FROM log_views))`;

/** Statements of the reader: they see committed records only. */
function prepareReads(db: DatabaseSync, batchSize: number) {
  return {
    // Found through the appended_at index, without the write lock the DELETE takes.
    prunable: db.prepare(`SELECT EXISTS (SELECT 1 FROM log_records WHERE ${PRUNABLE}) AS any`),
    // The batch size is written into the SQL: a bound LIMIT makes SQLite prepare the
    // statement again on every call.
    fetch: db.prepare(
      `SELECT record_offset, key, value, headers FROM log_records
       WHERE topic = ? AND partition = ? AND record_offset >= ? ORDER BY record_offset LIMIT ${Math.max(1, Math.floor(batchSize))}`,
    ),
    ends: db.prepare('SELECT partition, next_offset FROM log_partition_ends WHERE topic = ?'),
    liveMembers: db.prepare('SELECT member_id, expires_at FROM log_group_members WHERE group_id = ? AND topic = ? ORDER BY member_id'),
  };
}

type Reads = ReturnType<typeof prepareReads>;

/** Reads of view topics: the events and the records kept here merged by offset, the ends the appends keep. */
function prepareViews(db: DatabaseSync, batchSize: number) {
  const fetches = new Map<string, StatementSync>();
  return {
    ...prepareViewReads(db),
    /** The fetch of a group that wants `types` (all when absent): one statement per set of types, made once. */
    fetchOf(types: readonly string[] | undefined): StatementSync {
      const key = types === undefined ? '*' : JSON.stringify([...types].sort());
      let fetch = fetches.get(key);
      if (!fetch) {
        fetch = db.prepare(
          `${eventRecordRows(types)}
           UNION ALL
           SELECT record_offset, key, value, headers, NULL, NULL, NULL, NULL, NULL, NULL, NULL FROM log_records
           WHERE topic = ?3 AND partition = ?1 AND record_offset >= ?2
           ORDER BY record_offset LIMIT ${Math.max(1, Math.floor(batchSize))}`,
        );
        fetches.set(key, fetch);
      }
      return fetch;
    },
  };
}

type Views = ReturnType<typeof prepareViews>;

/** What the log knows of one of its topics. */
interface TopicInfo {
  partitions: number;
  view: boolean;
}

function prepareStatements(db: DatabaseSync) {
  return {
    setEnd: db.prepare(
      `INSERT INTO log_partition_ends (topic, partition, next_offset) VALUES (?, ?, ?)
       ON CONFLICT (topic, partition) DO UPDATE SET next_offset = excluded.next_offset`,
    ),
    topicPartitions: db.prepare('SELECT partitions, EXISTS (SELECT 1 FROM log_views v WHERE v.topic = t.topic) AS view FROM log_topics t WHERE topic = ?'),
    createTopic: db.prepare('INSERT INTO log_topics (topic, partitions) VALUES (?, ?) ON CONFLICT DO NOTHING'),
    endOffset: db.prepare('SELECT coalesce(max(record_offset) + 1, 0) AS next FROM log_records WHERE topic = ? AND partition = ?'),
    prune: db.prepare(`DELETE FROM log_records WHERE ${PRUNABLE}`),
    insertRecord: db.prepare(
      'INSERT INTO log_records (topic, partition, record_offset, key, value, headers, appended_at) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    committed: db.prepare('SELECT next_offset FROM log_committed_offsets WHERE group_id = ? AND topic = ? AND partition = ?'),
    commit: db.prepare(
      `INSERT INTO log_committed_offsets (group_id, topic, partition, next_offset) VALUES (?, ?, ?, ?)
       ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset`,
    ),
    // A member's offset, written only while it owns the partition (no change: another member took it).
    commitIfOwner: db.prepare(
      `INSERT INTO log_committed_offsets (group_id, topic, partition, next_offset)
       SELECT ?1, ?2, ?3, ?4 WHERE EXISTS
         (SELECT 1 FROM log_partition_owners WHERE group_id = ?1 AND topic = ?2 AND partition = ?3 AND member_id = ?5)
       ON CONFLICT (group_id, topic, partition) DO UPDATE SET next_offset = excluded.next_offset`,
    ),
    joinMember: db.prepare(
      `INSERT INTO log_group_members (group_id, topic, member_id, expires_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (group_id, topic, member_id) DO UPDATE SET expires_at = excluded.expires_at`,
    ),
    rejoinMember: db.prepare(
      'INSERT INTO log_group_members (group_id, topic, member_id, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
    ),
    heartbeat: db.prepare('UPDATE log_group_members SET expires_at = ? WHERE group_id = ? AND topic = ? AND member_id = ?'),
    expireMembers: db.prepare('DELETE FROM log_group_members WHERE group_id = ? AND topic = ? AND expires_at < ?'),
    liveMembers: db.prepare('SELECT member_id FROM log_group_members WHERE group_id = ? AND topic = ? ORDER BY member_id'),
    leaveMember: db.prepare('DELETE FROM log_group_members WHERE group_id = ? AND topic = ? AND member_id = ?'),
    owners: db.prepare('SELECT partition, member_id FROM log_partition_owners WHERE group_id = ? AND topic = ?'),
    claim: db.prepare(
      `INSERT INTO log_partition_owners (group_id, topic, partition, member_id) VALUES (?, ?, ?, ?)
       ON CONFLICT (group_id, topic, partition) DO UPDATE SET member_id = excluded.member_id`,
    ),
    release: db.prepare('DELETE FROM log_partition_owners WHERE group_id = ? AND topic = ? AND partition = ? AND member_id = ?'),
    releaseAll: db.prepare('DELETE FROM log_partition_owners WHERE group_id = ? AND topic = ? AND member_id = ?'),
  };
}

type Statements = ReturnType<typeof prepareStatements>;

interface Settings {
  pollIntervalMs: number;
  sessionTimeoutMs: number;
  retryDelayMs: number;
  maxRetryDelayMs: number;
  batchSize: number;
}

function errorOf(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function nonEmptyString(name: string, value: unknown): void {
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be a non-empty string`);
}

export class SqliteLog implements Log {
  readonly #connections: SqliteConnections;
  readonly #db: DatabaseSync;
  readonly #statements: Statements;
  readonly #reads: Reads;
  readonly #settings: Settings;
  readonly #topics = new Map<string, TopicInfo>();
  /** Set once the file has a view topic (an events topic served from es_events). */
  #views: { reads: Views; counter: PartitionCounter } | null = null;
  readonly #consumers = new Set<GroupConsumer>();
  readonly #pruneTimer: NodeJS.Timeout | null;
  /** The retention timer's prune while it runs: one at a time, and close() waits for it. */
  #pruning: Promise<void> | null = null;
  #offsetReads: ReturnType<typeof prepareOffsetReads> | undefined;
  #closed = false;

  /** A path opens (and close() closes) connections of its own; a given connection stays the caller's. */
  constructor(database: DatabaseSync | string, options: SqliteLogOptions = {}) {
    this.#connections = connect(database, options);
    this.#db = this.#connections.writer;
    this.#settings = {
      pollIntervalMs: options.pollIntervalMs ?? 150,
      sessionTimeoutMs: options.sessionTimeoutMs ?? 10_000,
      retryDelayMs: options.retryDelayMs ?? 100,
      maxRetryDelayMs: options.maxRetryDelayMs ?? 5000,
      batchSize: options.batchSize ?? 100,
    };
    try {
      this.#db.exec(SCHEMA);
      this.#db.exec(BACKFILL_ENDS);
      if (options.eventsTopic !== undefined) this.#makeView(options.eventsTopic);
      this.#statements = prepareStatements(this.#db);
      this.#reads = prepareReads(this.#connections.reader, this.#settings.batchSize);
    } catch (error) {
      void this.#connections.release();
      throw error;
    }
    const retentionMs = options.retentionMs ?? 7 * 24 * 60 * 60_000;
    this.#pruneTimer = retentionMs > 0 ? setInterval(() => this.#prune(retentionMs), PRUNE_EVERY_MS) : null;
    this.#pruneTimer?.unref();
  }

  /**
   * The retention timer's turn. A failure (the write lock held past the busy timeout by another
   * process, a full disk) is a warning, as the consumers' are, and the next turn tries again: a
   * throw from a timer would end the process.
   */
  #prune(retentionMs: number): void {
    if (this.#closed || this.#pruning) return;
    this.#pruning = this.pruneBefore(new Date(Date.now() - retentionMs)).then(
      () => undefined,
      (error: unknown) => {
        if (!this.#closed) process.emitWarning(`the log's retention could not prune: ${errorOf(error).message}`, { code: 'RELAY_SQLITE_LOG' });
      },
    ).finally(() => {
      this.#pruning = null;
    });
  }

  /** Makes `topic` a view of es_events unless it exists already (as the log's own, or as a view). */
  #makeView(topic: string): void {
    nonEmptyString('eventsTopic', topic);
    const partitions = this.#db.prepare("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'es_partition_ends'").get() as { n: number };
    if (partitions.n === 0) throw new Error(`the events topic ${topic} can be served from the event store only in the event store's file; open the event store on it first`);
    const own = !this.#db.isTransaction;
    if (own) this.#db.exec('BEGIN IMMEDIATE');
    try {
      const count = (this.#db.prepare('SELECT count(*) AS n FROM es_partition_ends').get() as { n: number }).n;
      if (this.#db.prepare('INSERT INTO log_topics (topic, partitions) VALUES (?, ?) ON CONFLICT DO NOTHING').run(topic, count).changes > 0) {
        this.#db.prepare('INSERT INTO log_views (topic) VALUES (?)').run(topic);
      }
      if (own) this.#db.exec('COMMIT');
    } catch (error) {
      if (own && this.#db.isTransaction) this.#db.exec('ROLLBACK');
      throw error;
    }
  }

  /** True when the topic's records are the event store's events (a view topic): nothing needs to publish them. */
  followsEventStore(topic: string): boolean {
    this.#assertOpen();
    try {
      return this.#topicOf(topic).view;
    } catch {
      return false;
    }
  }

  /**
   * Deletes records appended before `cutoff`, except each partition's last one: it keeps the
   * partition's next offset, so offsets never go back and committed positions stay valid.
   * Only the log's own records: a view topic's events stay, as the event store keeps them.
   * Returns how many records were deleted. The DELETE is a write of the group commit, which waits
   * for another connection's write lock on a timer rather than in sqlite's busy handler (the
   * event loop would stop for up to its timeout); it runs only when the reader finds something
   * to delete, so the usual turn, with nothing old enough, takes no lock at all.
   */
  async pruneBefore(cutoff: Date): Promise<number> {
    this.#assertOpen();
    const at = cutoff.toISOString();
    if ((this.#reads.prunable.get(at) as { any: number }).any === 0) return 0;
    return Number((await this.#connections.commits.runStatement(() => this.#statements.prune.run(at))).changes);
  }

  /** Like Kafka's createTopics, an existing topic is left as it is, whatever its partition count. */
  async ensureTopic(topic: string, partitions: number): Promise<void> {
    this.#assertOpen();
    nonEmptyString('topic', topic);
    if (!Number.isInteger(partitions) || partitions < 1) throw new TypeError(`partitions must be an integer >= 1, got ${String(partitions)}`);
    this.#statements.createTopic.run(topic, partitions);
  }

  async publish(topic: string, records: OutgoingRecord[]): Promise<void> {
    this.#assertOpen();
    checkOutgoingRecords(records);
    if (records.length === 0) return;
    const { partitions, view } = this.#topicOf(topic);
    const s = this.#statements;
    const appendedAt = new Date().toISOString();
    let bytes = 0;
    for (const record of records) bytes += record.value.length;
    const counter = view ? this.#viewsOf().counter : null;
    await this.#connections.commits.run(() => {
      if (counter) {
        // Offsets of the counter the event store's appends take theirs from.
        for (const record of records) {
          const { partition, first } = counter.take(record.key, 1);
          s.insertRecord.run(topic, partition, first, record.key, record.value, JSON.stringify(record.headers ?? {}), appendedAt);
        }
        return;
      }
      const next = new Map<number, number>();
      for (const record of records) {
        const partition = partitionForKey(record.key, partitions);
        const offset = next.get(partition) ?? (s.endOffset.get(topic, partition) as { next: number }).next;
        s.insertRecord.run(topic, partition, offset, record.key, record.value, JSON.stringify(record.headers ?? {}), appendedAt);
        next.set(partition, offset + 1);
      }
      for (const [partition, offset] of next) s.setEnd.run(topic, partition, offset);
    }, bytes);
    notifyOnceCommitted(this.#connections.commits, topicSignal(this.#db, topic));
  }

  async consume(options: ConsumeOptions): Promise<LogConsumer> {
    this.#assertOpen();
    nonEmptyString('group', options.group);
    nonEmptyString('topic', options.topic);
    if (typeof options.handle !== 'function') throw new TypeError('handle must be a function');
    const { partitions, view } = this.#topicOf(options.topic);
    const source: Source = view ? viewSource(this.#db, options.topic, this.#viewsOf().reads, options.types) : ownSource(this.#db, options.topic, this.#reads, this.#statements);
    const consumer = new GroupConsumer(this.#db, this.#connections.commits, this.#statements, this.#reads, this.#settings, options, partitions, source, () => this.#consumers.delete(consumer));
    this.#consumers.add(consumer);
    return consumer;
  }

  async groupOffsets(topic: string, groups: readonly string[]): Promise<GroupPartitionOffsets[]> {
    this.#assertOpen();
    const { partitions, view } = this.#topicOf(topic);
    const q = (this.#offsetReads ??= prepareOffsetReads(this.#connections.reader));
    const offsetOf = (row: unknown) => (row as { record_offset: number } | undefined)?.record_offset;
    const views = view ? this.#viewsOf().reads : null;
    const bounds = Array.from({ length: partitions }, (_, partition) => {
      if (views) {
        // Events are never pruned; the log's own records of the topic may be.
        const end = (views.end.get(partition) as { next_offset: number } | undefined)?.next_offset ?? 0;
        const firsts = [(views.first.get(partition) as { first: number | null }).first, offsetOf(q.first.get(topic, partition))].filter((o) => o !== null && o !== undefined);
        return { start: firsts.length === 0 ? end : Math.min(...firsts), end };
      }
      // Retention keeps each partition's last record, so only a partition never written to is empty.
      const last = offsetOf(q.last.get(topic, partition));
      return last === undefined ? { start: 0, end: 0 } : { start: offsetOf(q.first.get(topic, partition))!, end: last + 1 };
    });
    return groups.flatMap((group) => {
      const committed = new Map((q.committed.all(group, topic) as Array<{ partition: number; next_offset: number }>).map((r) => [r.partition, r.next_offset]));
      return bounds.map(({ start, end }, partition) => ({
        group, partition, start: String(start), end: String(end),
        committed: committed.has(partition) ? String(committed.get(partition)) : null,
      }));
    });
  }

  async ping(): Promise<boolean> {
    if (this.#closed || this.#connections.commits.failure) return false;
    try {
      this.#db.prepare('SELECT 1').get();
      return true;
    } catch {
      return false;
    }
  }

  /** Stops every consumer (each finishes its in-flight handler and commits), then closes an owned connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#pruneTimer) clearInterval(this.#pruneTimer);
    await Promise.all([...[...this.#consumers].map((c) => c.stop()), this.#pruning]);
    await this.#connections.release();
  }

  #topicOf(topic: string): TopicInfo {
    nonEmptyString('topic', topic);
    let info = this.#topics.get(topic);
    if (info === undefined) {
      const row = this.#statements.topicPartitions.get(topic) as { partitions: number; view: number } | undefined;
      // Unlike a broker with auto-creation, a typo'd topic is an error rather than a new topic.
      if (!row) throw new Error(`topic "${topic}" does not exist; create it with ensureTopic()`);
      info = { partitions: row.partitions, view: row.view === 1 };
      this.#topics.set(topic, info);
    }
    return info;
  }

  #viewsOf(): { reads: Views; counter: PartitionCounter } {
    return (this.#views ??= { reads: prepareViews(this.#connections.reader, this.#settings.batchSize), counter: new PartitionCounter(this.#db) });
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('the log is closed');
  }
}

/** Read-only statements of groupOffsets (metrics): each one index seek on the records' primary key. */
function prepareOffsetReads(db: DatabaseSync) {
  return {
    first: db.prepare('SELECT record_offset FROM log_records WHERE topic = ? AND partition = ? ORDER BY record_offset LIMIT 1'),
    last: db.prepare('SELECT record_offset FROM log_records WHERE topic = ? AND partition = ? ORDER BY record_offset DESC LIMIT 1'),
    committed: db.prepare('SELECT partition, next_offset FROM log_committed_offsets WHERE group_id = ? AND topic = ?'),
  };
}

function topicSignal(db: DatabaseSync, topic: string): ChangeSignal {
  return changeSignal(db, `log-records\u0000${topic}`);
}

function groupSignal(db: DatabaseSync, group: string, topic: string): ChangeSignal {
  return changeSignal(db, `log-group\u0000${group}\u0000${topic}`);
}

/** Where a consumer finds a topic's records: the log's own, or a view's over es_events. */
interface Source {
  /** Each partition's next offset, for the partitions that have one. */
  ends(): Map<number, number>;
  /** The next offset of one partition. */
  end(partition: number): number;
  /** Records of the partition from `from` on, in offset order, a batch at most. */
  fetch(partition: number, from: number): LogRecord[];
  /** What wakes a consumer when records arrive. */
  signals: ChangeSignal[];
  /** Events must be durable before a group acts on them, as the event store's own reads wait (./event-store.ts). */
  waitsForDurable: boolean;
}

function ownSource(db: DatabaseSync, topic: string, reads: Reads, s: Statements): Source {
  return {
    ends: () => new Map((reads.ends.all(topic) as Array<{ partition: number; next_offset: number }>).map((r) => [r.partition, r.next_offset])),
    end: (partition) => (s.endOffset.get(topic, partition) as { next: number }).next,
    fetch: (partition, from) => (reads.fetch.all(topic, partition, from) as unknown as RecordRow[]).map((row) => recordOf(topic, partition, row)),
    signals: [topicSignal(db, topic)],
    waitsForDurable: false,
  };
}

function viewSource(db: DatabaseSync, topic: string, views: Views, types: readonly string[] | undefined): Source {
  const fetch = views.fetchOf(types);
  return {
    ends: () => new Map((views.ends.all() as Array<{ partition: number; next_offset: number }>).map((r) => [r.partition, r.next_offset])),
    end: (partition) => (views.end.get(partition) as { next_offset: number } | undefined)?.next_offset ?? 0,
    fetch: (partition, from) => (fetch.all(partition, from, topic) as unknown as ViewRow[]).map((row) => recordOf(topic, partition, row)),
    signals: [topicSignal(db, topic), eventsAppended(db)],
    waitsForDurable: true,
  };
}

interface PartitionCursor {
  /** Offset of the next record to hand to the handler or pass over. */
  next: number;
  /** The group's committed offset as this member last wrote or read it. */
  committed: number;
  /** Offset past the last record handed to the handler: a commit is due while it is past `committed`. */
  handledTo: number;
  /** Records passed over since the last commit, and when the first of them was (null: none). */
  passed: number;
  passedSince: number | null;
  /** A failed record is not retried before this time (ms since epoch). */
  retryAt: number;
  delay: number;
}

/**
 * Records passed over (a type the handler does not want) are committed lazily: redelivering them
 * after a crash hands nothing to the handler, so their offsets ride along with the next handled
 * record's commit, or are written once the consumer has been idle for a poll interval, on
 * leaving or handing the partition over, or at the latest after PASSED_OVER_COMMIT_MS or
 * PASSED_OVER_COMMIT_RECORDS. One second keeps the group's lag (relay_consumer_lag, /readyz's
 * "work waiting", which also counts the records passed over as progress) at most a second stale
 * under steady traffic; 5,000 records (50 fetches) bound what a crash makes the next owner read
 * again when the group races through a backlog it mostly passes over.
 */
const PASSED_OVER_COMMIT_MS = 1000;
const PASSED_OVER_COMMIT_RECORDS = 5000;
/**
 * While a round of handlers runs, the offsets of the records handled so far are written this
 * often, so that one partition whose handler waits does not hold back the others' commits.
 */
const ROUND_COMMIT_MS = 100;

class GroupConsumer implements LogConsumer {
  readonly #id = randomUUID();
  readonly #db: DatabaseSync;
  readonly #commits: GroupCommit;
  readonly #s: Statements;
  readonly #reads: Reads;
  readonly #settings: Settings;
  readonly #options: ConsumeOptions;
  readonly #group: string;
  readonly #topic: string;
  readonly #partitions: number;
  readonly #source: Source;
  readonly #members: ChangeSignal;
  readonly #owned = new Map<number, PartitionCursor>();
  /** The types the handler wants (null: every record); the others are passed over unhandled. */
  readonly #wanted: ReadonlySet<string> | null;
  readonly #abort = new AbortController();
  readonly #heartbeat: NodeJS.Timeout;
  readonly #running: Promise<void>;
  readonly #onStopped: () => void;
  #stopped: Promise<void> | undefined;
  #failing = false;
  /** The member ids the last rebalance saw, and the members signal version it ran at. */
  #lastMembers = '';
  #rebalancedAt: number | null = null;
  /** The owned partitions last told to onMembership. */
  #toldOwned: string | null = null;
  /** The offset write in flight: one at a time, covering every partition whose offset moved. */
  #writing: Promise<void> | null = null;
  /** When a round last found records (ms since epoch). */
  #lastWorkAt = 0;
  /** When #membershipChanged last read the member rows (ms since epoch). */
  #membersReadAt = 0;

  constructor(db: DatabaseSync, commits: GroupCommit, statements: Statements, reads: Reads, settings: Settings, options: ConsumeOptions, partitions: number, source: Source, onStopped: () => void) {
    this.#db = db;
    this.#commits = commits;
    this.#s = statements;
    this.#reads = reads;
    this.#settings = settings;
    this.#options = options;
    this.#group = options.group;
    this.#topic = options.topic;
    this.#partitions = partitions;
    this.#onStopped = onStopped;
    this.#source = source;
    this.#wanted = options.types === undefined ? null : new Set(options.types);
    this.#members = groupSignal(db, options.group, options.topic);
    // A timer rather than the fetch loop renews the lease, so a slow handler does not cost
    // the partitions; only a dead or blocked process stops it.
    this.#heartbeat = setInterval(() => this.#renewLease(), Math.max(10, Math.floor(settings.sessionTimeoutMs / 3)));
    this.#heartbeat.unref();
    this.#running = this.#join().then(() => this.#run());
  }

  stop(): Promise<void> {
    if (!this.#stopped) {
      this.#abort.abort();
      this.#stopped = this.#running.then(() => this.#leave());
    }
    return this.#stopped;
  }

  get #stopping(): boolean {
    return this.#abort.signal.aborted;
  }

  async #join(): Promise<void> {
    try {
      await this.#commits.run(() => this.#s.joinMember.run(this.#group, this.#topic, this.#id, Date.now() + this.#settings.sessionTimeoutMs));
    } catch (error) {
      // The first rebalance joins again (rejoinMember).
      process.emitWarning(errorOf(error).message, { code: 'RELAY_SQLITE_LOG' });
    }
    this.#tell('joined', []);
    this.#members.notify();
  }

  #tell(change: MembershipChange['change'], partitions: number[]): void {
    try {
      this.#options.onMembership?.({ change, group: this.#group, topic: this.#topic, memberId: this.#id, partitions });
    } catch {
      // A failing callback must not stop the consumer.
    }
  }

  /** Tells onMembership when the partitions this member owns differ from what it last told. */
  #tellOwned(): void {
    const partitions = [...this.#owned.keys()].sort((a, b) => a - b);
    const text = partitions.join(',');
    if (text === this.#toldOwned) return;
    this.#toldOwned = text;
    this.#tell('assigned', partitions);
  }

  async #run(): Promise<void> {
    const backoff = new Backoff({ initialDelayMs: this.#settings.pollIntervalMs, maxDelayMs: this.#settings.maxRetryDelayMs });
    while (!this.#stopping) {
      const membersVersion = this.#members.version;
      const seen = [this.#members, ...this.#source.signals].map((signal) => ({ signal, version: signal.version }));
      let wait: number;
      try {
        if (this.#membershipChanged(Date.now(), membersVersion)) await this.#rebalance(membersVersion);
        const work = this.#work(Date.now());
        if (work.length > 0) {
          this.#lastWorkAt = Date.now();
          if (this.#source.waitsForDurable) await this.#commits.durable();
          await this.#round(work, membersVersion);
          this.#recovered(backoff);
          continue;
        }
        await this.#commitDue(Date.now(), true);
        this.#recovered(backoff);
        wait = this.#idleWait(Date.now());
      } catch (error) {
        // The database refused (locked past the busy timeout, disk full...): what was not
        // committed is written at the next round or idle turn, after a back-off.
        // Warn once per outage.
        if (!this.#failing) {
          process.emitWarning(errorOf(error).message, { code: 'RELAY_SQLITE_LOG' });
          this.#tellState('recovering', errorOf(error));
        }
        this.#failing = true;
        this.#rebalancedAt = null;
        await sleep(backoff.next(), this.#abort.signal);
        continue;
      }
      await waitForChange(seen, wait, this.#abort.signal);
    }
  }

  /**
   * Partitions are handled at the same time, each in order: a handler that waits for a durable
   * write holds up only its own partition (as kafkajs does with partitionsConsumedConcurrently).
   * Their offsets go in one write per round (and one per ROUND_COMMIT_MS while it lasts), not
   * one per partition.
   *
   * The round's handlers run in one deferred-durability scope (../ports/durability.ts): a
   * handler's writes settle as soon as they take effect, so the records of a partition do not
   * wait for a commit and sync each, and an offset is written only once every write made before
   * it is durable. A round whose writes were lost (their batch failed to commit or sync) hands
   * its records over again.
   */
  async #round(work: Array<{ partition: number; cursor: PartitionCursor; records: LogRecord[] }>, membersVersion: number): Promise<void> {
    const before = work.map(({ partition, cursor }) => ({ partition, cursor, next: cursor.next }));
    let scope: DurabilityScope | undefined;
    // Started outside the scope, so that the offsets it writes are not given early themselves.
    const timer = setInterval(() => {
      // A failed write is written again at the end of the round, which reports it.
      if (scope && !this.#writing) this.#commitPositions((c) => c.handledTo > c.committed || this.#passedOverDue(c, Date.now(), false), scope).catch(() => {});
    }, ROUND_COMMIT_MS);
    let outcomes: Array<PromiseSettledResult<void>>;
    try {
      outcomes = await deferDurability((round) => {
        scope = round;
        return Promise.allSettled(work.map((w) => this.#process(w.partition, w.cursor, w.records, membersVersion)));
      });
    } catch (error) {
      for (const b of before) {
        if (this.#owned.get(b.partition) !== b.cursor) continue;
        b.cursor.next = Math.max(b.next, b.cursor.committed);
        b.cursor.handledTo = Math.min(b.cursor.handledTo, b.cursor.next);
      }
      throw error;
    } finally {
      clearInterval(timer);
    }
    await this.#commitDue(Date.now(), false);
    const failed = outcomes.find((o) => o.status === 'rejected');
    if (failed) throw (failed as PromiseRejectedResult).reason;
  }

  /**
   * Writes the offsets due: every moved one as soon as one partition has handled records past
   * its commit; records only passed over once they are due (PASSED_OVER_COMMIT_MS). `idle`:
   * the consumer found no records this turn.
   */
  async #commitDue(now: number, idle: boolean): Promise<void> {
    let due = false;
    for (const c of this.#owned.values()) {
      if (c.next <= c.committed) continue;
      if (c.handledTo > c.committed || this.#passedOverDue(c, now, idle)) due = true;
    }
    if (due) await this.#commitPositions(() => true);
  }

  #passedOverDue(c: PartitionCursor, now: number, idle: boolean): boolean {
    if (c.passedSince === null) return false;
    if (c.passed >= PASSED_OVER_COMMIT_RECORDS || now - c.passedSince >= PASSED_OVER_COMMIT_MS) return true;
    return idle && now - this.#lastWorkAt >= this.#settings.pollIntervalMs;
  }

  /**
   * One write of the positions of the owned partitions `which` picks, each only while this
   * member still owns it; a partition taken over meanwhile (our lease ran out) is dropped.
   */
  async #commitPositions(which: (c: PartitionCursor) => boolean, unsettled?: DurabilityScope): Promise<void> {
    while (this.#writing) await this.#writing;
    const written = new Map<number, { cursor: PartitionCursor; offset: number }>();
    for (const [partition, cursor] of this.#owned) {
      if (cursor.next > cursor.committed && which(cursor)) written.set(partition, { cursor, offset: cursor.next });
    }
    if (written.size === 0) return;
    // Mid-round: the handlers' writes up to these offsets become durable first.
    const write = (unsettled ? unsettled.settle() : Promise.resolve()).then(() => this.#commits.run(() => {
      const owned = new Set<number>();
      for (const [partition, { offset }] of written) {
        if (this.#s.commitIfOwner.run(this.#group, this.#topic, partition, offset, this.#id).changes > 0) owned.add(partition);
      }
      return owned;
    }));
    this.#writing = write.then(() => {}, () => {});
    try {
      const owned = await write;
      let lost = false;
      for (const [partition, { cursor, offset }] of written) {
        // Handed over in a rebalance meanwhile: its offset was written then.
        if (this.#owned.get(partition) !== cursor) continue;
        if (!owned.has(partition)) {
          this.#owned.delete(partition);
          lost = true;
          continue;
        }
        cursor.committed = Math.max(cursor.committed, offset);
        if (cursor.next === offset) {
          cursor.passed = 0;
          cursor.passedSince = null;
        }
      }
      if (lost) this.#tellOwned();
    } finally {
      this.#writing = null;
    }
  }

  #recovered(backoff: Backoff): void {
    if (!this.#failing) return;
    this.#failing = false;
    backoff.reset();
    this.#tellState('running');
  }

  #tellState(state: ConsumerState, error?: Error): void {
    try {
      this.#options.onState?.(state, error);
    } catch {
      // A failing callback must not stop the consumer.
    }
  }

  /**
   * Whether the group may look different from the last rebalance: a member of this process
   * joined or left (the signal), one of another process did (the member rows differ), a lease
   * ran out, or ours is missing. The rebalance is a write; the rows are read at most once a
   * poll interval (a busy consumer runs rounds far more often), so a member of another process
   * is seen as an idle one would see it.
   */
  #membershipChanged(now: number, membersVersion: number): boolean {
    if (this.#rebalancedAt !== membersVersion) return true;
    if (now - this.#membersReadAt < this.#settings.pollIntervalMs) return false;
    this.#membersReadAt = now;
    const rows = this.#reads.liveMembers.all(this.#group, this.#topic) as Array<{ member_id: string; expires_at: number }>;
    if (rows.some((r) => r.expires_at < now)) return true;
    return rows.map((r) => r.member_id).join(',') !== this.#lastMembers;
  }

  #renewLease(): void {
    this.#commits
      .run(() => this.#s.heartbeat.run(Date.now() + this.#settings.sessionTimeoutMs, this.#group, this.#topic, this.#id))
      // Missing one renewal is harmless; the lease outlasts three of them.
      .catch(() => {});
  }

  async #rebalance(membersVersion: number): Promise<void> {
    const s = this.#s;
    const g = this.#group;
    const t = this.#topic;
    let released = false;
    let rejoined = false;
    let seenMembers = '';
    await this.#commits.run(() => {
      const now = Date.now();
      s.expireMembers.run(g, t, now);
      // Our own lease may have run out while this process was blocked; come back as a member.
      rejoined = s.rejoinMember.run(g, t, this.#id, now + this.#settings.sessionTimeoutMs).changes > 0;
      const members = (s.liveMembers.all(g, t) as Array<{ member_id: string }>).map((r) => r.member_id);
      seenMembers = members.join(',');
      const live = new Set(members);
      const owners = new Map((s.owners.all(g, t) as Array<{ partition: number; member_id: string }>).map((r) => [r.partition, r.member_id]));
      for (let partition = 0; partition < this.#partitions; partition++) {
        const desired = members[partition % members.length];
        const owner = owners.get(partition);
        if (owner === this.#id) {
          if (desired !== this.#id) {
            // Records passed over and not yet committed: the next owner need not read them again.
            const cursor = this.#owned.get(partition);
            if (cursor && cursor.next > cursor.committed) s.commit.run(g, t, partition, cursor.next);
            s.release.run(g, t, partition, this.#id);
            this.#owned.delete(partition);
            released = true;
          } else if (!this.#owned.has(partition)) {
            this.#owned.set(partition, this.#startCursor(partition));
          }
          continue;
        }
        // Someone took it while we were presumed dead.
        this.#owned.delete(partition);
        if (desired === this.#id && (owner === undefined || !live.has(owner))) {
          s.claim.run(g, t, partition, this.#id);
          this.#owned.set(partition, this.#startCursor(partition));
        }
      }
    });
    this.#lastMembers = seenMembers;
    this.#rebalancedAt = membersVersion;
    this.#tellOwned();
    // A partition we wanted may still be owned by a live member that has not released it yet:
    // look again at the next wake-up rather than wait for the membership to change.
    const wanted = seenMembers.split(',');
    for (let partition = 0; partition < this.#partitions; partition++) {
      if (wanted[partition % wanted.length] === this.#id && !this.#owned.has(partition)) this.#rebalancedAt = null;
    }
    if (released || rejoined) this.#members.notify();
  }

  /** Runs inside the rebalance transaction. */
  #startCursor(partition: number): PartitionCursor {
    const cursor: PartitionCursor = { next: 0, committed: 0, handledTo: 0, passed: 0, passedSince: null, retryAt: 0, delay: this.#settings.retryDelayMs };
    const committed = this.#s.committed.get(this.#group, this.#topic, partition) as { next_offset: number } | undefined;
    if (committed) {
      cursor.next = committed.next_offset;
    } else if (this.#options.fromBeginning === false) {
      // Committing the end right away pins "latest" to the moment the group first took the
      // partition, so records published before a restart are not skipped.
      cursor.next = this.#source.end(partition);
      this.#s.commit.run(this.#group, this.#topic, partition, cursor.next);
    }
    cursor.committed = cursor.handledTo = cursor.next;
    return cursor;
  }

  /** The records past our cursor of every owned partition that has some and is not backing off. */
  #work(now: number): Array<{ partition: number; cursor: PartitionCursor; records: LogRecord[] }> {
    if (this.#owned.size === 0) return [];
    // One query says which partitions hold records past our cursors; only those are fetched.
    const ends = this.#source.ends();
    const work: Array<{ partition: number; cursor: PartitionCursor; records: LogRecord[] }> = [];
    for (const [partition, cursor] of this.#owned) {
      if (cursor.retryAt > now || (ends.get(partition) ?? 0) <= cursor.next) continue;
      const records = this.#source.fetch(partition, cursor.next);
      if (records.length > 0) work.push({ partition, cursor, records });
    }
    return work;
  }

  #idleWait(now: number): number {
    let wait = this.#settings.pollIntervalMs;
    for (const cursor of this.#owned.values()) {
      if (cursor.retryAt > now) wait = Math.min(wait, cursor.retryAt - now);
      // Records passed over are written a poll interval after the last round that found records, or at their bound.
      if (cursor.passedSince !== null && cursor.next > cursor.committed) {
        wait = Math.min(wait, Math.max(1, Math.min(this.#lastWorkAt + this.#settings.pollIntervalMs, cursor.passedSince + PASSED_OVER_COMMIT_MS) - now));
      }
    }
    return wait;
  }

  /**
   * Hands the fetched records to the handler in order, moving the partition's position past
   * each one handled or passed over; the round writes the offsets. Stops early when the
   * partition is no longer ours, the group changed, or the consumer stops.
   */
  async #process(partition: number, cursor: PartitionCursor, records: LogRecord[], membersVersion: number): Promise<void> {
    // Told before each handler runs, so that a slow handler does not hold back the news.
    let passed = 0;
    const tellPassed = () => {
      if (passed > 0) this.#tellPassedOver(passed);
      passed = 0;
    };
    try {
      for (const record of records) {
        // A member joined or left: rebalance before the next record so a partition that now
        // belongs to someone else is handed over without waiting for the batch to end.
        if (this.#stopping || this.#owned.get(partition) !== cursor || this.#members.version !== membersVersion) break;
        if (this.#passesOver(record)) {
          cursor.next = Number(record.offset) + 1;
          cursor.passed++;
          cursor.passedSince ??= Date.now();
          passed++;
          continue;
        }
        tellPassed();
        try {
          await this.#options.handle(record);
        } catch (error) {
          try {
            this.#options.onHandlerError?.(errorOf(error), record);
          } catch {
            // A failing error callback must not stop delivery.
          }
          cursor.retryAt = Date.now() + cursor.delay;
          cursor.delay = Math.min(cursor.delay * 2, this.#settings.maxRetryDelayMs);
          break;
        }
        cursor.delay = this.#settings.retryDelayMs;
        cursor.next = cursor.handledTo = Number(record.offset) + 1;
      }
    } finally {
      tellPassed();
    }
  }

  #tellPassedOver(count: number): void {
    try {
      this.#options.onPassedOver?.(count);
    } catch {
      // A failing callback must not stop the consumer.
    }
  }

  /** A record of a type the handler does not want (ConsumeOptions.types); one without a type is always handed over. */
  #passesOver(record: LogRecord): boolean {
    if (this.#wanted === null) return false;
    const type = record.headers['event-type'];
    return type !== undefined && !this.#wanted.has(type);
  }

  async #leave(): Promise<void> {
    clearInterval(this.#heartbeat);
    try {
      // Records passed over since the last commit: the next owner need not read them again.
      await this.#commitPositions(() => true);
    } catch {
      // The next owner passes over them again.
    }
    try {
      await this.#commits.run(() => {
        this.#s.releaseAll.run(this.#group, this.#topic, this.#id);
        this.#s.leaveMember.run(this.#group, this.#topic, this.#id);
      });
    } catch (error) {
      // Our lease will expire and the others take over then.
      process.emitWarning(errorOf(error).message, { code: 'RELAY_SQLITE_LOG' });
    }
    this.#owned.clear();
    this.#tell('left', []);
    this.#members.notify();
    this.#onStopped();
  }
}
