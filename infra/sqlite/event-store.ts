// The embedded event store: EventStoreDB's append/read/subscribe semantics on one sqlite table.
// The global order ($all) is the table's AUTOINCREMENT key: sqlite has a single writer, so
// keys are handed out in commit order and a reader that sees key N has seen every key below N.
// Each event also gets its place on the log's events topic (./event-partitions.ts).
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite';
import { WrongExpectedRevisionError } from '../ports/event-store.ts';
import type {
  AppendResult,
  EventFilter,
  EventStore,
  ExpectedRevision,
  NewEvent,
  ReadAllOptions,
  StoredEvent,
  SubscribeAllOptions,
  Subscription,
} from '../ports/event-store.ts';
import { Backoff, retryUntilDone, sleep } from '../retry.ts';
import { notifyOnceCommitted, waitForChange } from './change-signal.ts';
import type { ChangeSignal } from './change-signal.ts';
import { connect, type ConnectOptions, type SqliteConnections } from './connections.ts';
import { eventsAppended, migrateEventPartitions, PARTITION_COLUMNS, PartitionCounter } from './event-partitions.ts';

export interface SqliteEventStoreOptions extends ConnectOptions {
  /** How often live subscriptions look for events appended by other processes. Default 150 ms. */
  pollIntervalMs?: number;
  /** Events read per query while a subscription catches up. Default 200. */
  batchSize?: number;
  /** First delay before a failed handler call or read is retried; it doubles up to maxRetryDelayMs. Default 50 ms. */
  retryDelayMs?: number;
  /** Default 5000 ms. */
  maxRetryDelayMs?: number;
}

interface EventRow {
  position: number;
  event_id: string;
  stream_id: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  recorded_at: string;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS es_events (
  position    INTEGER PRIMARY KEY AUTOINCREMENT,
  event_id    TEXT    NOT NULL,
  stream_id   TEXT    NOT NULL,
  revision    INTEGER NOT NULL,
  type        TEXT    NOT NULL,
  data        TEXT    NOT NULL,
  metadata    TEXT    NOT NULL,
  recorded_at TEXT    NOT NULL,
  ${PARTITION_COLUMNS},
  UNIQUE (stream_id, revision)
);
CREATE INDEX IF NOT EXISTS es_events_stream_event_id ON es_events (stream_id, event_id);
`;

const COLUMNS = 'position, event_id, stream_id, revision, type, data, metadata, recorded_at';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    id: row.event_id,
    streamId: row.stream_id,
    revision: row.revision,
    position: String(row.position),
    type: row.type,
    data: JSON.parse(row.data),
    metadata: JSON.parse(row.metadata),
    recordedAt: row.recorded_at,
  };
}

function parsePosition(position: string | null | undefined): number {
  if (position === null || position === undefined) return 0;
  if (typeof position !== 'string' || !/^\d{1,15}$/.test(position)) {
    throw new TypeError(`"${String(position)}" is not a position of the sqlite event store`);
  }
  return Number(position);
}

function checkPrefixes(name: string, prefixes: string[] | undefined): void {
  if (prefixes === undefined) return;
  // An empty list would silently match nothing, which is never what a caller means.
  if (!Array.isArray(prefixes) || prefixes.length === 0 || prefixes.some((p) => typeof p !== 'string')) {
    throw new TypeError(`filter.${name} must be a non-empty array of strings`);
  }
}

function checkMaxCount(maxCount: number | undefined): void {
  if (maxCount !== undefined && (!Number.isInteger(maxCount) || maxCount < 0)) {
    throw new TypeError(`maxCount must be a non-negative integer, got ${String(maxCount)}`);
  }
}

function errorOf(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** Calls a subscriber's callback; one that throws must not end the subscription. */
function tell(callback: () => void): void {
  try {
    callback();
  } catch {
    // ignored: see above
  }
}

export class SqliteEventStore implements EventStore {
  readonly #connections: SqliteConnections;
  /** Reads see committed events only; appends go through the writer's group commit. */
  readonly #reader: DatabaseSync;
  readonly #signal: ChangeSignal;
  readonly #pollIntervalMs: number;
  readonly #batchSize: number;
  readonly #retryDelayMs: number;
  readonly #maxRetryDelayMs: number;
  readonly #subscriptions = new Set<Subscription>();
  readonly #readAllStatements = new Map<string, StatementSync>();
  #closed = false;

  readonly #lastOfStream: StatementSync;
  readonly #revisionOfId: StatementSync;
  readonly #writtenRange: StatementSync;
  readonly #insert: StatementSync;
  readonly #streamRange: StatementSync;
  readonly #lastPosition: StatementSync;
  readonly #countAfter: StatementSync;
  readonly #partitions: PartitionCounter;

  /** A path opens (and close() closes) connections of its own; a given connection stays the caller's. */
  constructor(database: DatabaseSync | string, options: SqliteEventStoreOptions = {}) {
    this.#connections = connect(database, options);
    const writer = this.#connections.writer;
    this.#reader = this.#connections.reader;
    this.#pollIntervalMs = options.pollIntervalMs ?? 150;
    this.#batchSize = options.batchSize ?? 200;
    this.#retryDelayMs = options.retryDelayMs ?? 50;
    this.#maxRetryDelayMs = options.maxRetryDelayMs ?? 5000;
    try {
      writer.exec(SCHEMA);
      migrateEventPartitions(writer);
      this.#partitions = new PartitionCounter(writer);
      this.#lastOfStream = writer.prepare(
        'SELECT revision, position FROM es_events WHERE stream_id = ? ORDER BY revision DESC LIMIT 1',
      );
      this.#revisionOfId = writer.prepare(
        'SELECT min(revision) AS revision FROM es_events WHERE stream_id = ? AND event_id = ?',
      );
      // Revisions are dense, so a range of them replaces LIMIT ?, with which the bundled
      // SQLite prepares the statement again on every call.
      const range = `SELECT ${COLUMNS} FROM es_events WHERE stream_id = ? AND revision >= ? AND revision < ? ORDER BY revision`;
      this.#writtenRange = writer.prepare(range);
      this.#insert = writer.prepare(
        `INSERT INTO es_events (event_id, stream_id, revision, type, data, metadata, recorded_at, log_partition, log_offset)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      );
      this.#streamRange = this.#reader.prepare(range);
      this.#lastPosition = this.#reader.prepare('SELECT max(position) AS position FROM es_events');
      this.#countAfter = this.#reader.prepare('SELECT count(*) AS count FROM (SELECT 1 FROM es_events WHERE position > ? LIMIT ?)');
    } catch (error) {
      void this.#connections.release();
      throw error;
    }
    this.#signal = eventsAppended(writer);
  }

  async append(streamId: string, events: NewEvent[], options: { expectedRevision: ExpectedRevision }): Promise<AppendResult> {
    this.#assertOpen();
    const expected = options?.expectedRevision;
    if (typeof streamId !== 'string' || streamId === '') throw new TypeError('streamId must be a non-empty string');
    if (!(expected === 'any' || expected === 'no_stream' || expected === 'stream_exists' || (Number.isSafeInteger(expected) && expected >= 0))) {
      throw new TypeError(`expectedRevision must be 'any', 'no_stream', 'stream_exists' or a revision >= 0, got ${String(expected)}`);
    }
    // The ids are checked as EventStoreDB would, so code that works here works there.
    for (const event of events) {
      if (typeof event.id !== 'string' || !UUID.test(event.id)) throw new TypeError(`event id must be a UUID, got "${String(event.id)}"`);
      if (typeof event.type !== 'string' || event.type === '') throw new TypeError('event type must be a non-empty string');
    }
    let bytes = 0;
    const rows = events.map((event) => {
      const row = { id: event.id.toLowerCase(), type: event.type, data: JSON.stringify(event.data ?? {}), metadata: JSON.stringify(event.metadata ?? {}) };
      bytes += row.data.length + row.metadata.length;
      return row;
    });
    // Settles once the batch this append joined is durably committed (./group-commit.ts).
    const outcome = await this.#connections.commits.run(() => this.#appendLocked(streamId, rows, expected), bytes);
    if (outcome.wrote) notifyOnceCommitted(this.#connections.commits, this.#signal);
    return outcome.result;
  }

  #appendLocked(
    streamId: string,
    events: Array<{ id: string; type: string; data: string; metadata: string }>,
    expected: ExpectedRevision,
  ): { result: AppendResult; wrote: boolean } {
    const last = this.#lastOfStream.get(streamId) as { revision: number; position: number } | undefined;
    const actual = last ? last.revision : 'no_stream';

    // Idempotency, as in EventStoreDB: when the events already sit where this append would
    // have put them, the append succeeds without writing. A partial match is a conflict.
    if (last && events.length > 0) {
      let start: number | undefined;
      if (typeof expected === 'number') start = expected + 1;
      else if (expected === 'no_stream') start = 0;
      else start = (this.#revisionOfId.get(streamId, events[0].id) as { revision: number | null }).revision ?? undefined;
      if (start !== undefined && start <= last.revision) {
        const existing = this.#writtenRange.all(streamId, start, start + events.length) as unknown as EventRow[];
        const same = existing.length === events.length && existing.every((row, i) => row.event_id === events[i].id);
        if (same) {
          return {
            result: { nextExpectedRevision: start + events.length - 1, position: String(existing[existing.length - 1].position) },
            wrote: false,
          };
        }
        if (expected === 'any' || expected === 'stream_exists') throw new WrongExpectedRevisionError(streamId, expected, actual);
      }
    }

    if (typeof expected === 'number' ? actual !== expected : expected === 'no_stream' ? last !== undefined : expected === 'stream_exists' && !last) {
      throw new WrongExpectedRevisionError(streamId, expected, actual);
    }

    if (events.length === 0) {
      return { result: { nextExpectedRevision: last ? last.revision : -1, position: last ? String(last.position) : '0' }, wrote: false };
    }
    const recordedAt = new Date().toISOString();
    let revision = last ? last.revision : -1;
    let position = 0;
    const place = this.#partitions.take(streamId, events.length);
    let offset = place.first;
    for (const event of events) {
      revision++;
      const { lastInsertRowid } = this.#insert.run(event.id, streamId, revision, event.type, event.data, event.metadata, recordedAt, place.partition, offset++);
      position = Number(lastInsertRowid);
    }
    return { result: { nextExpectedRevision: revision, position: String(position) }, wrote: true };
  }

  async readStream(streamId: string, options: { fromRevision?: number; maxCount?: number } = {}): Promise<StoredEvent[]> {
    this.#assertOpen();
    const fromRevision = options.fromRevision ?? 0;
    if (!Number.isSafeInteger(fromRevision) || fromRevision < 0) throw new TypeError(`fromRevision must be a revision >= 0, got ${String(fromRevision)}`);
    checkMaxCount(options.maxCount);
    const upTo = options.maxCount === undefined ? Number.MAX_SAFE_INTEGER : fromRevision + options.maxCount;
    const rows = this.#streamRange.all(streamId, fromRevision, upTo) as unknown as EventRow[];
    // A decision on these events (a replay's answer, a claim) must not rest on an append whose
    // sync is still running.
    await this.#connections.commits.durable();
    return rows.map(toStoredEvent);
  }

  async readAll(options: ReadAllOptions = {}): Promise<StoredEvent[]> {
    this.#assertOpen();
    const after = parsePosition(options.after);
    const upTo = options.upTo === null || options.upTo === undefined ? Number.MAX_SAFE_INTEGER : parsePosition(options.upTo);
    if (upTo < after) throw new TypeError(`upTo ${options.upTo} is before after ${options.after}`);
    checkMaxCount(options.maxCount);
    checkPrefixes('streamPrefixes', options.filter?.streamPrefixes);
    checkPrefixes('eventTypePrefixes', options.filter?.eventTypePrefixes);
    const rows = this.#readAllRows(after, upTo, options.maxCount ?? -1, options.filter);
    await this.#connections.commits.durable();
    return rows.map(toStoredEvent);
  }

  #readAllRows(after: number, upTo: number, limit: number, filter: EventFilter | undefined): EventRow[] {
    const streamPrefixes = filter?.streamPrefixes ?? [];
    const typePrefixes = filter?.eventTypePrefixes ?? [];
    // The limit is written into the statement: a bound LIMIT makes SQLite prepare it again on
    // every call. Subscriptions use one batch size, so few statements are ever made.
    const limitSql = limit >= 0 ? ` LIMIT ${Math.floor(limit)}` : '';
    const key = `${streamPrefixes.length}/${typePrefixes.length}${limitSql}`;
    let statement = this.#readAllStatements.get(key);
    if (!statement) {
      // substr/length count characters on both sides, so non-ASCII prefixes compare correctly.
      const anyPrefix = (column: string, count: number) =>
        Array.from({ length: count }, () => `substr(${column}, 1, length(?)) = ?`).join(' OR ');
      let where = 'position > ? AND position <= ?';
      if (streamPrefixes.length > 0) where += ` AND (${anyPrefix('stream_id', streamPrefixes.length)})`;
      if (typePrefixes.length > 0) where += ` AND (${anyPrefix('type', typePrefixes.length)})`;
      statement = this.#reader.prepare(`SELECT ${COLUMNS} FROM es_events WHERE ${where} ORDER BY position${limitSql}`);
      if (this.#readAllStatements.size >= 64) this.#readAllStatements.clear();
      this.#readAllStatements.set(key, statement);
    }
    const params: SQLInputValue[] = [after, upTo];
    for (const prefix of [...streamPrefixes, ...typePrefixes]) params.push(prefix, prefix);
    return statement.all(...params) as unknown as EventRow[];
  }

  async countAfter(after: string | null, limit: number): Promise<number> {
    this.#assertOpen();
    const from = parsePosition(after);
    checkMaxCount(limit);
    const row = this.#countAfter.get(from, limit) as { count: number };
    return row.count;
  }

  subscribeAll(options: SubscribeAllOptions, onEvent: (event: StoredEvent) => Promise<void>): Subscription {
    this.#assertOpen();
    let cursor = parsePosition(options.after);
    const filter = options.filter;
    checkPrefixes('streamPrefixes', filter?.streamPrefixes);
    checkPrefixes('eventTypePrefixes', filter?.eventTypePrefixes);
    const abort = new AbortController();

    // Handler failures are retried forever (infra/retry.ts says why). So are failed reads (a
    // lock held past the busy timeout, an I/O error): from the last event delivered, after a
    // back-off, told to onReadFailed. Nothing here ends the subscription but stop().
    const policy = { initialDelayMs: this.#retryDelayMs, maxDelayMs: this.#maxRetryDelayMs };
    const deliver = (event: StoredEvent): Promise<boolean> => retryUntilDone(() => onEvent(event), policy, abort.signal);
    const readFailures = new Backoff(policy);
    let failing = false;

    const run = async (): Promise<void> => {
      while (!abort.signal.aborted) {
        const seen = this.#signal.version;
        let rows: EventRow[];
        let upTo: number;
        try {
          upTo = (this.#lastPosition.get() as { position: number | null }).position ?? 0;
          rows = this.#readAllRows(cursor, upTo, this.#batchSize, filter);
        } catch (error) {
          if (abort.signal.aborted) return;
          failing = true;
          const delay = readFailures.next();
          tell(() => options.onReadFailed?.(errorOf(error), delay));
          await sleep(delay, abort.signal);
          continue;
        }
        if (failing) {
          failing = false;
          readFailures.reset();
          tell(() => options.onReadResumed?.());
        }
        // Nothing downstream (the log, the read models, a sent email) may get ahead of the
        // event store's own durability.
        if (rows.length > 0) await this.#connections.commits.durable();
        for (const row of rows) {
          if (abort.signal.aborted) return;
          if (!(await deliver(toStoredEvent(row)))) return;
          cursor = row.position;
        }
        if (rows.length < this.#batchSize) {
          // Everything up to upTo was scanned; skipping past filtered-out events keeps the
          // next poll from rescanning them.
          cursor = Math.max(cursor, upTo);
          await waitForChange([{ signal: this.#signal, version: seen }], this.#pollIntervalMs, abort.signal);
        }
      }
    };

    const done = Promise.resolve().then(run);
    const subscription: Subscription = {
      stop: async () => {
        abort.abort();
        await done;
        this.#subscriptions.delete(subscription);
      },
    };
    this.#subscriptions.add(subscription);
    return subscription;
  }

  /**
   * True when the events table can be read (not only when the file opens), and the file takes
   * writes: false after a failed sync, and while writes fail on the file (a full disk) or on
   * its write lock held by another connection past the busy timeout, until one succeeds, the
   * ping's own included (GroupCommit.writable).
   */
  async ping(): Promise<boolean> {
    if (this.#closed || !(await this.#connections.commits.writable())) return false;
    try {
      this.#reader.prepare('SELECT 1 FROM es_events LIMIT 1').get();
      return true;
    } catch {
      return false;
    }
  }

  writeFailure(): string | null {
    return this.#connections.commits.writeFailure?.message ?? null;
  }

  /** Stops every subscription (waiting for in-flight handler calls), then closes an owned connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((s) => s.stop()));
    await this.#connections.release();
  }

  #assertOpen(): void {
    if (this.#closed) throw new Error('the event store is closed');
  }
}
