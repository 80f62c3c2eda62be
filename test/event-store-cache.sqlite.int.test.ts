// The sqlite event store keeps the streams it read (infra/sqlite/stream-cache.ts): a read asks
// the file only for what it does not hold, yet sees every event any connection, thread or
// process committed, honours fromRevision and maxCount, stays within its bounds, and hands
// out events no reader can change.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import type { StreamCacheLimits } from '../infra/sqlite/stream-cache.ts';
import { deferred, waitUntil } from './support/eventually.ts';
import { startFixture } from './support/fixture-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-event-store-cache-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

const appender = new URL('./fixtures/sqlite-event-appender.ts', import.meta.url);
const event = (type: string, data: Record<string, unknown> = {}) => ({ id: randomUUID(), type, data });
const test = suite('sqlite event store: the stream cache');

/** A store whose stream reads are counted (each statement run on es_events by stream). */
function countingStore(file: string, streamCache?: StreamCacheLimits) {
  const counted = { streamReads: 0 };
  const store = new SqliteEventStore(file, {
    streamCache,
    readFault: (sql) => {
      if (sql.includes('WHERE stream_id = ?')) counted.streamReads++;
      return null;
    },
  });
  return { store, counted };
}

/** The stream as the file holds it, read past every cache. */
function revisionsInFile(file: string, stream: string): Array<{ revision: number; id: string; data: unknown }> {
  const db = openDatabase(file);
  try {
    return (db.prepare('SELECT revision, event_id, data FROM es_events WHERE stream_id = ? ORDER BY revision').all(stream) as Array<{ revision: number; event_id: string; data: string }>)
      .map((row) => ({ revision: row.revision, id: row.event_id, data: JSON.parse(row.data) }));
  } finally {
    db.close();
  }
}

const shape = (events: StoredEvent[]) => events.map((e) => ({ revision: e.revision, id: e.id, data: e.data }));

test('a range the cache holds is answered without a query; a read past its end asks only for the tail', async () => {
  const file = join(dir, 'counted.db');
  const { store, counted } = countingStore(file);
  try {
    const stream = `counted-${randomUUID()}`;
    await store.append(stream, [event('A'), event('B'), event('C')], { expectedRevision: 'no_stream' });
    const first = await store.readStream(stream);
    assert.is(counted.streamReads, 1);

    const middle = await store.readStream(stream, { fromRevision: 1, maxCount: 2 });
    assert.is(counted.streamReads, 1, 'revisions 1-2 are held: no query');
    assert.is(middle[0], first[1], 'the same decoded event, not parsed again');

    await store.append(stream, [event('D')], { expectedRevision: 2 });
    const all = await store.readStream(stream);
    assert.is(counted.streamReads, 2, 'one tail query');
    assert.equal(all.map((e) => e.type), ['A', 'B', 'C', 'D']);
    assert.is(all[0], first[0]);
    assert.equal(await store.readStream(stream, { fromRevision: 4 }), []);
    assert.equal(await store.readStream(stream, { maxCount: 0 }), []);
  } finally {
    await store.close();
  }
});

test('events another process appends after a cached read are seen, complete and in order', async () => {
  const file = join(dir, 'other-process.db');
  const { store, counted } = countingStore(file);
  try {
    const stream = `shared-${randomUUID()}`;
    await store.append(stream, [event('Opened')], { expectedRevision: 'no_stream' });
    assert.equal((await store.readStream(stream)).map((e) => e.revision), [0], 'the stream is cached at one event');

    // The fixture appends 20 events one by one from its own process and connections.
    const child = startFixture(appender, [file, stream, 'optimistic', '20']);
    const { appended } = JSON.parse(await child.waitForLine((l) => l.startsWith('{'), 'the child appended', 40_000)) as { appended: string[] };
    await child.exited;

    const before = counted.streamReads;
    const events = await store.readStream(stream);
    assert.is(counted.streamReads, before + 1, 'one query, for the tail');
    assert.equal(events.map((e) => e.revision), Array.from({ length: 21 }, (_, i) => i));
    assert.equal(events.slice(1).map((e) => e.id), appended);
    assert.equal(shape(events), revisionsInFile(file, stream));
    assert.equal(shape(await store.readStream(stream, { fromRevision: 15, maxCount: 3 })), revisionsInFile(file, stream).slice(15, 18));
  } finally {
    await store.close();
  }
});

test('reads with any fromRevision and maxCount agree with the file while another store appends', async () => {
  const file = join(dir, 'agree.db');
  // Small bounds, so that windows are trimmed and evicted along the way.
  const { store: reader } = countingStore(file, { maxStreams: 3, maxBytes: 12_000, maxStreamBytes: 6_000 });
  const writer = new SqliteEventStore(file);
  try {
    const streams = Array.from({ length: 5 }, () => `agree-${randomUUID()}`);
    const lengths = new Map(streams.map((s) => [s, 0]));
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    for (let step = 0; step < 400; step++) {
      const stream = streams[random(streams.length)];
      if (random(3) === 0) {
        const length = lengths.get(stream)!;
        const count = 1 + random(3);
        const events = Array.from({ length: count }, (_, i) => event('Step', { step, i, pad: 'x'.repeat(random(600)) }));
        await writer.append(stream, events, { expectedRevision: length === 0 ? 'no_stream' : length - 1 });
        lengths.set(stream, length + count);
        continue;
      }
      const length = lengths.get(stream)!;
      const fromRevision = random(length + 2);
      const maxCount = random(2) === 0 ? undefined : random(length + 2);
      const got = await reader.readStream(stream, { fromRevision, maxCount });
      const inFile = revisionsInFile(file, stream).slice(fromRevision, maxCount === undefined ? undefined : fromRevision + maxCount);
      assert.equal(shape(got), inFile, `step ${step}: ${stream} from ${fromRevision}, maxCount ${maxCount}`);
      const held = reader.cachedStreams;
      assert.ok(held.streams <= 3 && held.bytes <= 12_000, `step ${step}: within bounds, ${JSON.stringify(held)}`);
    }
  } finally {
    await reader.close();
    await writer.close();
  }
});

test('the cache stays within its bounds: many streams, a long stream, huge events', async () => {
  const file = join(dir, 'bounds.db');
  const limits = { maxStreams: 50, maxBytes: 200_000, maxStreamBytes: 40_000 };
  const { store, counted } = countingStore(file, limits);
  try {
    const tag = randomUUID().slice(0, 8);
    for (let i = 0; i < 300; i++) {
      const stream = `many-${tag}-${i}`;
      await store.append(stream, [event('A', { i }), event('B', { i })], { expectedRevision: 'no_stream' });
      assert.is((await store.readStream(stream)).length, 2);
      assert.ok(store.cachedStreams.streams <= 50, `at most 50 streams, held ${store.cachedStreams.streams}`);
    }
    assert.is(store.cachedStreams.streams, 50);
    // The least recently used went first: the latest streams are held, the first are read again.
    const before = counted.streamReads;
    await store.readStream(`many-${tag}-299`, { maxCount: 2 });
    assert.is(counted.streamReads, before, 'the latest stream is held');
    await store.readStream(`many-${tag}-0`, { maxCount: 2 });
    assert.is(counted.streamReads, before + 1, 'the first stream was evicted');

    // A long stream keeps only its latest events within its share, and reads stay complete.
    const long = `long-${tag}`;
    for (let batch = 0; batch < 10; batch++) {
      const events = Array.from({ length: 50 }, (_, i) => event('Long', { n: batch * 50 + i, pad: 'y'.repeat(100) }));
      await store.append(long, events, { expectedRevision: batch === 0 ? 'no_stream' : batch * 50 - 1 });
      assert.is((await store.readStream(long)).length, (batch + 1) * 50);
      assert.ok(store.cachedStreams.bytes <= 200_000, `bytes within the bound: ${store.cachedStreams.bytes}`);
    }
    assert.equal((await store.readStream(long)).map((e) => e.data.n), Array.from({ length: 500 }, (_, i) => i));
    const tailOnly = counted.streamReads;
    assert.equal((await store.readStream(long, { fromRevision: 495, maxCount: 5 })).map((e) => e.data.n), [495, 496, 497, 498, 499]);
    assert.is(counted.streamReads, tailOnly, 'the latest events of the long stream are held');

    // An event larger than a stream's share is never kept.
    const huge = `huge-${tag}`;
    await store.append(huge, [event('Huge', { pad: 'z'.repeat(100_000) })], { expectedRevision: 'no_stream' });
    const { bytes } = store.cachedStreams;
    const [read] = await store.readStream(huge);
    assert.is((read.data.pad as string).length, 100_000);
    assert.ok(store.cachedStreams.bytes <= bytes, 'the huge event added nothing');
    assert.ok(store.cachedStreams.bytes <= 200_000 && store.cachedStreams.streams <= 50);
  } finally {
    await store.close();
  }
});

test('events handed out are frozen through and through: a change throws and reaches no other reader', async () => {
  const file = join(dir, 'frozen.db');
  const store = new SqliteEventStore(file);
  try {
    const stream = `frozen-${randomUUID()}`;
    await store.append(stream, [{ ...event('Shaped', { list: [{ a: 1 }], nested: { deep: { n: 1 } } }), metadata: { m: { k: 'v' } } }], { expectedRevision: 'no_stream' });
    const [given] = await store.readStream(stream);
    const objects: unknown[] = [given, given.data, given.metadata, given.data.list, (given.data.list as unknown[])[0], given.data.nested, (given.data.nested as { deep: unknown }).deep, given.metadata.m];
    for (const object of objects) assert.ok(Object.isFrozen(object), `frozen: ${JSON.stringify(object)}`);
    assert.throws(() => ((given.data.list as Array<{ a: number }>)[0].a = 2), TypeError);
    assert.throws(() => (given.data.list as unknown[]).push(2), TypeError);
    const [again] = await store.readStream(stream);
    assert.equal(again.data, { list: [{ a: 1 }], nested: { deep: { n: 1 } } });
    // The array itself is the caller's: sorting or appending to it touches nothing shared.
    const all = await store.readStream(stream);
    all.push(all[0]);
    assert.is((await store.readStream(stream)).length, 1);
  } finally {
    await store.close();
  }
});

test('a reader that is also the writer keeps nothing it read inside a batch that then rolls back', async () => {
  // In-memory: one connection writes and reads, so a read sees the open batch's writes.
  const gate = deferred<void>();
  let failNextCommit = false;
  const store = new SqliteEventStore(':memory:', {
    commitHold: async ({ stage }) => {
      if (stage === 'commit' && failNextCommit) {
        failNextCommit = false;
        await gate.promise;
        throw new Error('the commit failed');
      }
    },
  });
  try {
    const stream = `memory-${randomUUID()}`;
    await store.append(stream, [event('A')], { expectedRevision: 'no_stream' });
    assert.equal((await store.readStream(stream)).map((e) => e.type), ['A'], 'A is cached');
    failNextCommit = true;
    const lost = store.append(stream, [event('B')], { expectedRevision: 0 }).then(() => 'appended', (error: Error) => error.message);
    await waitUntil(async () => (await store.readStream(stream)).length === 2, 'the open batch shows B to its own connection');
    gate.resolve();
    assert.is(await lost, 'the commit failed');
    assert.equal((await store.readStream(stream)).map((e) => e.type), ['A'], 'B, rolled back, was not kept');
  } finally {
    await store.close();
  }
});

test.run();
