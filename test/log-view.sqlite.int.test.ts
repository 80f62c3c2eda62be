// The embedded log in the event store's own file serves the events topic from es_events
// (infra/sqlite/event-partitions.ts): each appended event is a record of the topic without a
// second write, in its stream's partition and in commit order; what the Log port promises of
// groups, offsets and retention holds for it as for a topic of the log's own.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { eventRecord } from '../infra/events-topic.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import type { LogConsumer, LogRecord } from '../infra/ports/log.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { SqliteLog } from '../infra/sqlite/log.ts';
import { partitionForKey } from '../infra/sqlite/partitioner.ts';
import { waitUntil } from './support/eventually.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-log-view-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const TOPIC = 'relay.events';
const test = suite('sqlite log: the events topic as a view of the event store');

interface Opened {
  file: string;
  events: SqliteEventStore;
  log: SqliteLog;
  close(): Promise<void>;
}

function openBoth(options: { retentionMs?: number } = {}): Opened {
  const file = join(dir, `${randomUUID()}.db`);
  const events = new SqliteEventStore(file, { pollIntervalMs: 50 });
  const log = new SqliteLog(file, { eventsTopic: TOPIC, pollIntervalMs: 50, retryDelayMs: 20, ...options });
  return { file, events, log, close: async () => { await log.close(); await events.close(); } };
}

const newEvent = (type: string, data: Record<string, unknown> = {}) => ({ id: randomUUID(), type, data });

/** Appends `perStream` events to each of `streams` streams, interleaved, one append each. */
async function appendInterleaved(events: SqliteEventStore, streams: string[], perStream: number): Promise<void> {
  for (let revision = 0; revision < perStream; revision++) {
    await Promise.all(streams.map((stream) => events.append(stream, [newEvent(`Type${revision}`, { n: revision, text: 'é ✓ "quoted" \\ \u2028' })], { expectedRevision: revision === 0 ? 'no_stream' : revision - 1 })));
  }
}

function collect(log: SqliteLog, group: string, handle?: (record: LogRecord) => Promise<void>): { records: LogRecord[]; consumer: Promise<LogConsumer> } {
  const records: LogRecord[] = [];
  const consumer = log.consume({ group, topic: TOPIC, handle: async (record) => {
    await handle?.(record);
    records.push(record);
  } });
  return { records, consumer };
}

const count = (file: string, sql: string): number => {
  const db = new DatabaseSync(file, { readOnly: true });
  try {
    return (db.prepare(sql).get() as { n: number }).n;
  } finally {
    db.close();
  }
};

test('each appended event is a record of the topic, in its stream\'s partition and in order, the forwarder\'s record of it, written once', async () => {
  const opened = openBoth();
  const { events, log, file } = opened;
  try {
    await log.ensureTopic(TOPIC, 3); // the view keeps the event store's partition count
    assert.ok(log.followsEventStore(TOPIC));
    const streams = Array.from({ length: 12 }, (_, i) => `email-${i}-${randomUUID()}`);
    await appendInterleaved(events, streams, 4);
    const all = await events.readAll();
    const a = collect(log, 'group-a');
    const b = collect(log, 'group-b');
    await waitUntil(() => a.records.length === all.length && b.records.length === all.length, 'both groups have every event');
    await (await a.consumer).stop();
    await (await b.consumer).stop();

    for (const { records } of [a, b]) {
      // The forwarder's record of each event, exactly once.
      const byId = new Map(records.map((r) => [r.headers['event-id'], r]));
      assert.is(byId.size, all.length);
      for (const event of all) {
        const record = byId.get(event.id)!;
        const forwarded = eventRecord(event);
        assert.equal({ key: record.key, value: record.value, headers: record.headers }, forwarded);
        assert.equal(JSON.parse(record.value) as StoredEvent, event);
        assert.is(record.partition, partitionForKey(event.streamId, 8));
      }
      // Per partition: offsets 0, 1, 2... in the global order; per stream: revisions in order.
      for (let partition = 0; partition < 8; partition++) {
        const inPartition = records.filter((r) => r.partition === partition);
        assert.equal(inPartition.map((r) => r.offset), inPartition.map((_, i) => String(i)));
        const positions = inPartition.map((r) => Number((JSON.parse(r.value) as StoredEvent).position));
        assert.equal(positions, [...positions].sort((x, y) => x - y));
      }
    }
    const offsets = await log.groupOffsets(TOPIC, ['group-a', 'group-b']);
    assert.is(offsets.length, 16);
    assert.is(offsets.filter((o) => o.group === 'group-a').reduce((n, o) => n + Number(o.end), 0), all.length);
    for (const o of offsets) assert.is(o.committed ?? o.start, o.end, `group ${o.group} partition ${o.partition} committed everything`);
    // Written once: nothing in the log's own records.
    assert.is(count(file, 'SELECT count(*) AS n FROM log_records'), 0);
  } finally {
    await opened.close();
  }
});

test('a record published to the topic (a parked event sent again) takes the next offset of its key\'s partition, between the events', async () => {
  const opened = openBoth();
  const { events, log } = opened;
  try {
    const stream = `email-${randomUUID()}`;
    await events.append(stream, [newEvent('First')], { expectedRevision: 'no_stream' });
    const [first] = await events.readStream(stream);
    await log.publish(TOPIC, [{ ...eventRecord(first), headers: { 'event-type': 'First', 'relay-retry-group': 'g' } }]);
    await events.append(stream, [newEvent('Second')], { expectedRevision: 0 });
    const c = collect(log, 'g');
    await waitUntil(() => c.records.length === 3, 'the group has both events and the record sent again');
    await (await c.consumer).stop();
    assert.equal(c.records.map((r) => [r.offset, r.headers['event-type'], r.headers['relay-retry-group'] ?? null]), [
      ['0', 'First', null], ['1', 'First', 'g'], ['2', 'Second', null],
    ]);
    assert.ok(c.records.every((r) => r.partition === partitionForKey(stream, 8)));
    const ends = await log.groupOffsets(TOPIC, ['g']);
    assert.is(ends.find((o) => o.partition === partitionForKey(stream, 8))!.end, '3');
  } finally {
    await opened.close();
  }
});

test('a group that names its types is handed only those (a record sent again included), whole, and commits past the others', async () => {
  const opened = openBoth();
  const { events, log } = opened;
  try {
    const streams = Array.from({ length: 6 }, () => `email-${randomUUID()}`);
    await appendInterleaved(events, streams, 4);
    const [first] = await events.readStream(streams[0]);
    await log.publish(TOPIC, [{ ...eventRecord(first), headers: { 'event-type': 'Type0', 'relay-retry-group': 'typed' } }]);
    const records: LogRecord[] = [];
    const consumer = await log.consume({ group: 'typed', topic: TOPIC, types: ['Type1', 'Type0'], handle: async (record) => void records.push(record) });
    await waitUntil(async () => (await log.groupOffsets(TOPIC, ['typed'])).every((o) => (o.committed ?? o.start) === o.end), 'the group committed every partition to its end');
    await consumer.stop();
    assert.equal(records.map((r) => r.headers['event-type']).sort(), [...Array(7).fill('Type0'), ...Array(6).fill('Type1')]);
    // Handed over whole: the value is the event as the event store reads it.
    for (const record of records.filter((r) => r.headers['relay-retry-group'] === undefined)) {
      const [event] = await events.readStream(record.key, { fromRevision: Number(record.headers['event-type'].slice(4)), maxCount: 1 });
      assert.equal(JSON.parse(record.value), JSON.parse(eventRecord(event).value));
    }
  } finally {
    await opened.close();
  }
});

test('records passed over are committed lazily: an idle group reaches lag 0, and a stopped one has committed them', async () => {
  const opened = openBoth();
  const { events, log } = opened;
  try {
    const streams = Array.from({ length: 12 }, () => `email-${randomUUID()}`);
    // Each stream: Type0 (wanted), then Type1 and Type2 (passed over): every partition ends with records passed over.
    await appendInterleaved(events, streams, 3);
    const lagZero = async () => (await log.groupOffsets(TOPIC, ['lazy'])).every((o) => (o.committed ?? o.start) === o.end);
    const handled: LogRecord[] = [];
    let passed = 0;
    const options = { group: 'lazy', topic: TOPIC, types: ['Type0'], handle: async (record: LogRecord) => void handled.push(record), onPassedOver: (n: number) => void (passed += n) };
    const consumer = await log.consume(options);
    await waitUntil(() => handled.length === 12 && passed === 24, 'the group handled the wanted events and passed over the others');
    await waitUntil(lagZero, 'the idle group committed past the records it passed over');

    // More records of types it does not want only: nothing to handle, still lag 0 once idle.
    await Promise.all(streams.map((stream) => events.append(stream, [newEvent('Type9')], { expectedRevision: 2 })));
    await waitUntil(() => passed === 36, 'the group passed over the new records');
    await waitUntil(lagZero, 'the idle group committed past them too');

    // Stopped right after passing over: stop() writes what it passed over.
    await Promise.all(streams.map((stream) => events.append(stream, [newEvent('Type9')], { expectedRevision: 3 })));
    await waitUntil(() => passed === 48, 'the group passed over the newest records');
    await consumer.stop();
    assert.ok(await lagZero(), 'stop() committed the records passed over');
    assert.is(handled.length, 12);

    // Taken up again from there: nothing handled or passed over twice.
    let passedAgain = 0;
    const again = await log.consume({ ...options, onPassedOver: (n: number) => void (passedAgain += n) });
    await Promise.all(streams.map((stream) => events.append(stream, [newEvent('Type0')], { expectedRevision: 4 })));
    await waitUntil(() => handled.length === 24, 'the group handles the new wanted events');
    await again.stop();
    assert.is(passedAgain, 0);
    assert.equal(new Set(handled.map((r) => `${r.partition}/${r.offset}`)).size, 24, 'each handled once');
  } finally {
    await opened.close();
  }
});

test('a failing handler gets the same event again, nothing behind it meanwhile; a member that joins takes partitions over from the committed offsets', async () => {
  const opened = openBoth();
  const { events, log, file } = opened;
  try {
    const streams = Array.from({ length: 16 }, (_, i) => `email-${i}-${randomUUID()}`);
    await appendInterleaved(events, streams, 2);
    const total = streams.length * 2;
    let failed = false;
    const seen: string[] = [];
    const first = log.consume({ group: 'g', topic: TOPIC, handle: async (record) => {
      if (!failed && record.offset === '0' && record.partition === partitionForKey(streams[0], 8)) {
        failed = true;
        throw new Error('once');
      }
      seen.push(`${record.partition}/${record.offset}`);
    } });
    await waitUntil(() => new Set(seen).size === total, 'the first member handled every event');
    assert.ok(failed);
    // The second member runs in another log on the same file, as another process would.
    const other = new SqliteLog(file, { eventsTopic: TOPIC, pollIntervalMs: 50 });
    const later: string[] = [];
    const second = await other.consume({ group: 'g', topic: TOPIC, handle: async (record) => void later.push(`${record.partition}/${record.offset}`) });
    await waitUntil(async () => (await log.groupOffsets(TOPIC, ['g'])).length === 8 && await ownersSplit(file), 'the partitions are split between the two members');
    await appendInterleaved(events, streams.map((s) => `${s}-more`), 2);
    await waitUntil(() => new Set([...seen, ...later]).size === total * 2, 'the group handled the later events too');
    // Nothing handled before the split was handed to the second member again.
    assert.ok(later.every((place) => !seen.slice(0, total).includes(place)), JSON.stringify(later));
    assert.ok(later.length > 0, 'the second member handled some');
    await second.stop();
    await (await first).stop();
    await other.close();
  } finally {
    await opened.close();
  }
});

async function ownersSplit(file: string): Promise<boolean> {
  return count(file, "SELECT count(DISTINCT member_id) AS n FROM log_partition_owners WHERE group_id = 'g'") === 2
    && count(file, "SELECT count(*) AS n FROM log_partition_owners WHERE group_id = 'g'") === 8;
}

test('retention prunes only the log\'s own records: the events stay, and a new group still reads every one', async () => {
  const opened = openBoth({ retentionMs: 1 });
  const { events, log, file } = opened;
  try {
    const streams = Array.from({ length: 5 }, () => `email-${randomUUID()}`);
    await appendInterleaved(events, streams, 2);
    const [event] = await events.readStream(streams[0]);
    await log.publish(TOPIC, [eventRecord(event)]);
    assert.is(count(file, 'SELECT count(*) AS n FROM log_records'), 1);
    assert.is(await log.pruneBefore(new Date(Date.now() + 60_000)), 1);
    assert.is(count(file, 'SELECT count(*) AS n FROM es_events'), 10);
    const c = collect(log, 'late');
    await waitUntil(() => c.records.length === 10, 'the new group read every event');
    await (await c.consumer).stop();
    const offsets = await log.groupOffsets(TOPIC, ['late']);
    assert.ok(offsets.every((o) => o.start === '0'), JSON.stringify(offsets));
  } finally {
    await opened.close();
  }
});

test('a file written before the events had places gets them in the global order when opened', async () => {
  const file = join(dir, `old-${randomUUID()}.db`);
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA journal_mode = WAL;
    CREATE TABLE es_events (position INTEGER PRIMARY KEY AUTOINCREMENT, event_id TEXT NOT NULL, stream_id TEXT NOT NULL, revision INTEGER NOT NULL,
      type TEXT NOT NULL, data TEXT NOT NULL, metadata TEXT NOT NULL, recorded_at TEXT NOT NULL, UNIQUE (stream_id, revision));`);
  const insert = db.prepare('INSERT INTO es_events (event_id, stream_id, revision, type, data, metadata, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)');
  const streams = Array.from({ length: 10 }, (_, i) => `email-old-${i}`);
  for (let revision = 0; revision < 3; revision++) {
    for (const stream of streams) insert.run(randomUUID(), stream, revision, 'Old', '{}', '{}', new Date().toISOString());
  }
  db.close();
  const events = new SqliteEventStore(file);
  const log = new SqliteLog(file, { eventsTopic: TOPIC, pollIntervalMs: 50 });
  try {
    // Appends after the backfill continue each partition's offsets.
    await events.append(streams[0], [newEvent('New')], { expectedRevision: 2 });
    const all = await events.readAll();
    const c = collect(log, 'g');
    await waitUntil(() => c.records.length === all.length, 'the group read the old events and the new one');
    await (await c.consumer).stop();
    for (let partition = 0; partition < 8; partition++) {
      const inPartition = c.records.filter((r) => r.partition === partition);
      assert.equal(inPartition.map((r) => r.offset), inPartition.map((_, i) => String(i)));
      const positions = inPartition.map((r) => Number((JSON.parse(r.value) as StoredEvent).position));
      assert.equal(positions, [...positions].sort((x, y) => x - y));
    }
    assert.is(c.records.at(-1)!.headers['event-type'], 'New');
  } finally {
    await log.close();
    await events.close();
  }
});

test('a topic the log already holds as its own stays a copy; a log without the event store in its file cannot serve one', async () => {
  const file = join(dir, `copy-${randomUUID()}.db`);
  const events = new SqliteEventStore(file);
  const before = new SqliteLog(file);
  await before.ensureTopic(TOPIC, 8);
  await before.publish(TOPIC, [{ key: 'k', value: 'copied' }]);
  await before.close();
  const log = new SqliteLog(file, { eventsTopic: TOPIC });
  try {
    assert.not.ok(log.followsEventStore(TOPIC));
    assert.is((await log.groupOffsets(TOPIC, ['g'])).reduce((n, o) => n + Number(o.end), 0), 1);
  } finally {
    await log.close();
    await events.close();
  }
  assert.throws(() => new SqliteLog(join(dir, `alone-${randomUUID()}.db`), { eventsTopic: TOPIC }), /event store's file/);
});

test.run();
