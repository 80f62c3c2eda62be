// Each event's place on the events topic, kept by the sqlite event store so that an embedded
// log in the same file can serve that topic from the event store's own rows (./log.ts, view
// topics) instead of a copy: its partition, the one its key (the stream id) gets on the topic
// (./partitioner.ts, as the forwarder's record would), and its offset in that partition, both
// written in the append's own transaction. Records published to a view topic (an event a group
// parked, sent again) take their offsets from the same counter, es_partition_ends, so that an
// offset is never given twice and a partition's offsets follow commit order.
//
// Every append keeps them, whether a log serves the topic or not: a log may be opened on the
// file later. A file written before gets them once, in the global order, when it is opened.
import type { DatabaseSync, StatementSync } from 'node:sqlite';
import { EVENTS_TOPIC_PARTITIONS, encodeEventText, eventRecordHeaders } from '../events-topic.ts';
import type { LogRecord } from '../ports/log.ts';
import { changeSignal, type ChangeSignal } from './change-signal.ts';
import { quoteText } from './document-query.ts';
import { partitionForKey } from './partitioner.ts';

/** The columns es_events gets for its place on the topic (in its CREATE TABLE, or added to an older file). */
export const PARTITION_COLUMNS = 'log_partition INTEGER, log_offset INTEGER';

const ENDS_SCHEMA = `
CREATE TABLE IF NOT EXISTS es_partition_ends (
  partition   INTEGER PRIMARY KEY,
  next_offset INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS es_events_log_offset ON es_events (log_partition, log_offset);
`;

/** The wake-up of appends to es_events (readers of the file in this process, and of other threads). */
export const eventsAppended = (db: DatabaseSync): ChangeSignal => changeSignal(db, 'es_events');

/**
 * Run by the event store once es_events exists: adds the columns and the partition counter to
 * a file made before them and gives the events that lack a place theirs, in the global order.
 */
export function migrateEventPartitions(db: DatabaseSync): void {
  const columns = (db.prepare('PRAGMA table_info(es_events)').all() as Array<{ name: string }>).map((c) => c.name);
  const hasColumns = columns.includes('log_partition');
  const hasEnds = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'es_partition_ends'").get() !== undefined;
  if (hasColumns && hasEnds && !placeless(db)) return;
  const own = !db.isTransaction;
  if (own) db.exec('BEGIN IMMEDIATE');
  try {
    // Looked at again under the lock: another connection may have migrated the file meanwhile.
    if (!(db.prepare('PRAGMA table_info(es_events)').all() as Array<{ name: string }>).some((c) => c.name === 'log_partition')) {
      for (const column of PARTITION_COLUMNS.split(', ')) db.exec(`ALTER TABLE es_events ADD COLUMN ${column}`);
    }
    db.exec(ENDS_SCHEMA);
    const fill = db.prepare('INSERT OR IGNORE INTO es_partition_ends (partition, next_offset) VALUES (?, 0)');
    if ((db.prepare('SELECT count(*) AS n FROM es_partition_ends').get() as { n: number }).n === 0) {
      for (let p = 0; p < EVENTS_TOPIC_PARTITIONS; p++) fill.run(p);
    }
    if (placeless(db)) backfill(db);
    if (own) db.exec('COMMIT');
  } catch (error) {
    if (own && db.isTransaction) db.exec('ROLLBACK');
    throw error;
  }
}

const placeless = (db: DatabaseSync) => db.prepare('SELECT 1 FROM es_events WHERE log_partition IS NULL LIMIT 1').get() !== undefined;

function backfill(db: DatabaseSync): void {
  const ends = endsOf(db);
  const update = db.prepare('UPDATE es_events SET log_partition = ?, log_offset = ? WHERE position = ?');
  // In chunks, so that a large store's ids are not all held at once.
  const chunk = db.prepare('SELECT position, stream_id FROM es_events WHERE log_partition IS NULL ORDER BY position LIMIT 10000');
  for (let rows = chunk.all(); rows.length > 0; rows = chunk.all()) {
    for (const row of rows as Array<{ position: number; stream_id: string }>) {
      const partition = partitionForKey(row.stream_id, ends.length);
      update.run(partition, ends[partition]++, row.position);
    }
  }
  const setEnd = db.prepare('UPDATE es_partition_ends SET next_offset = ? WHERE partition = ?');
  ends.forEach((next, partition) => setEnd.run(next, partition));
}

function endsOf(db: DatabaseSync): number[] {
  const rows = db.prepare('SELECT partition, next_offset FROM es_partition_ends ORDER BY partition').all() as Array<{ partition: number; next_offset: number }>;
  return rows.map((r) => r.next_offset);
}

/** Gives places on the topic inside the caller's write transaction. */
export class PartitionCounter {
  readonly partitions: number;
  readonly #take: StatementSync;

  constructor(db: DatabaseSync) {
    this.partitions = (db.prepare('SELECT count(*) AS n FROM es_partition_ends').get() as { n: number }).n;
    this.#take = db.prepare('UPDATE es_partition_ends SET next_offset = next_offset + ? WHERE partition = ? RETURNING next_offset');
  }

  /** `count` consecutive offsets in the partition of `key`: the first of them and the partition. */
  take(key: string, count: number): { partition: number; first: number } {
    const partition = partitionForKey(key, this.partitions);
    const { next_offset } = this.#take.get(count, partition) as { next_offset: number };
    return { partition, first: next_offset - count };
  }
}

/**
 * The topic's records of one partition as es_events holds them, in the shape of the log's own
 * rows (null value: an event). Given `types`, the other types' rows come without their data
 * and metadata: a group that skips them does not read them.
 */
export function eventRecordRows(types?: readonly string[]): string {
  const wanted = types === undefined ? null : `type IN (${types.map(quoteText).join(', ') || 'NULL'})`;
  const body = wanted === null ? 'data, metadata' : `CASE WHEN ${wanted} THEN data END AS data, CASE WHEN ${wanted} THEN metadata END AS metadata`;
  return `SELECT log_offset AS record_offset, stream_id AS key, NULL AS value, NULL AS headers,
  position, event_id, revision, type, ${body}, recorded_at FROM es_events WHERE log_partition = ?1 AND log_offset >= ?2`;
}


/** The statements a log reads a view topic's partitions with (on a reader of the event store's file). */
export function prepareViewReads(db: DatabaseSync) {
  return {
    ends: db.prepare('SELECT partition, next_offset FROM es_partition_ends'),
    end: db.prepare('SELECT next_offset FROM es_partition_ends WHERE partition = ?'),
    first: db.prepare('SELECT min(log_offset) AS first FROM es_events WHERE log_partition = ?'),
  };
}

export interface EventRecordRow {
  record_offset: number;
  key: string;
  position: number;
  event_id: string;
  revision: number;
  type: string;
  data: string;
  metadata: string;
  recorded_at: string;
}

/** An event row as a record of the topic: the forwarder's record of the event (../events-topic.ts), its value written only when read. */
export function eventRowRecord(topic: string, partition: number, row: EventRecordRow): LogRecord {
  let value: string | undefined;
  return {
    topic,
    partition,
    offset: String(row.record_offset),
    key: row.key,
    headers: eventRecordHeaders(row.type, row.event_id),
    get value() {
      return (value ??= encodeEventText({
        id: row.event_id, streamId: row.key, revision: row.revision, position: row.position, type: row.type,
        data: row.data, metadata: row.metadata, recordedAt: row.recorded_at,
      }));
    },
  };
}
