// The sqlite event store: the shared contract, plus what only an embedded file store has
// (several connections and processes on one file, owned vs. borrowed connections).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { WrongExpectedRevisionError } from '../infra/ports/event-store.ts';
import type { StoredEvent } from '../infra/ports/event-store.ts';
import { openDatabase } from '../infra/sqlite/database.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { eventStoreContract } from './contracts/event-store.contract.ts';
import { deferred, settle, waitUntil } from './support/eventually.ts';
import { startFixture } from './support/fixture-process.ts';

const dir = mkdtempSync(join(tmpdir(), 'relay-event-store-'));
process.on('exit', () => rmSync(dir, { recursive: true, force: true }));

eventStoreContract('sqlite', async () => {
  // Reads of the events table fail while `failing` (the file locked past the busy timeout, say).
  let failing = false;
  const store = new SqliteEventStore(join(dir, 'contract.db'), {
    readFault: (sql) => (failing && sql.includes('es_events') ? Object.assign(new Error('disk I/O error'), { code: 'ERR_SQLITE_ERROR', errcode: 10 }) : null),
  });
  return { store, close: () => store.close(), failReads: (on) => void (failing = on) };
});

const appender = new URL('./fixtures/sqlite-event-appender.ts', import.meta.url);
const event = (type: string, data: Record<string, unknown> = {}) => ({ id: randomUUID(), type, data });
const test = suite('sqlite event store');

test('two stores on one file see, subscribe to and race each other', async () => {
  const file = join(dir, 'two-stores.db');
  const a = new SqliteEventStore(file);
  const b = new SqliteEventStore(file);
  try {
    const stream = `pair-${randomUUID()}`;
    await a.append(stream, [event('Opened')], { expectedRevision: 'no_stream' });
    assert.equal((await b.readStream(stream)).map((e) => e.type), ['Opened']);

    const seen: StoredEvent[] = [];
    const subscription = b.subscribeAll({ filter: { streamPrefixes: [stream] } }, async (e) => {
      seen.push(e);
    });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).append(stream, [event('Raced', { i })], { expectedRevision: 0 })),
    );
    assert.is(outcomes.filter((o) => o.status === 'fulfilled').length, 1, 'one append wins across both stores');
    await a.append(stream, [event('Closed')], { expectedRevision: 1 });
    await waitUntil(() => seen.length >= 3, 'the subscription on b sees appends made through a');
    await subscription.stop();
    assert.equal(seen.map((e) => e.type), ['Opened', 'Raced', 'Closed']);
  } finally {
    await a.close();
    await b.close();
  }
});

test('racing processes: exactly one append with the same expected revision wins', async () => {
  const file = join(dir, 'processes.db');
  const store = new SqliteEventStore(file);
  const stream = `race-${randomUUID()}`;
  await store.append(stream, [event('Opened')], { expectedRevision: 'no_stream' });
  const seen: StoredEvent[] = [];
  const subscription = store.subscribeAll({ filter: { streamPrefixes: [stream] } }, async (e) => {
    seen.push(e);
  });
  const children = Array.from({ length: 4 }, () => startFixture(appender, [file, stream, 'race']));
  try {
    await Promise.all(children.map((c) => c.waitForLine((l) => l === 'ready', 'the child is ready')));
    for (const child of children) child.child.stdin!.write('go\n');
    const results = await Promise.all(
      children.map(async (c) => JSON.parse(await c.waitForLine((l) => l.startsWith('{'), 'the child appended')) as { won: boolean; actual?: number }),
    );
    assert.is(results.filter((r) => r.won).length, 1, `one process wins: ${JSON.stringify(results)}`);
    for (const r of results.filter((r) => !r.won)) assert.is(r.actual, 1);
    // No in-process notification comes from another process: this arrives by polling.
    await waitUntil(() => seen.length >= 2, 'the winning append from another process reaches the subscription');
    assert.equal(seen.map((e) => e.type), ['Opened', 'Raced']);
    assert.equal((await store.readStream(stream)).map((e) => e.revision), [0, 1]);
  } finally {
    for (const c of children) c.child.kill();
    await Promise.all(children.map((c) => c.exited));
    await subscription.stop();
    await store.close();
  }
});

test('optimistic appends from several processes lose nothing and keep revisions contiguous', async () => {
  const file = join(dir, 'optimistic.db');
  const stream = `counted-${randomUUID()}`;
  const children = Array.from({ length: 3 }, () => startFixture(appender, [file, stream, 'optimistic', '20']));
  const results = await Promise.all(
    children.map(async (c) => JSON.parse(await c.waitForLine((l) => l.startsWith('{'), 'the child finished', 40_000)) as { appended: string[] }),
  );
  await Promise.all(children.map((c) => c.exited));
  const store = new SqliteEventStore(file);
  try {
    const events = await store.readStream(stream);
    assert.equal(events.map((e) => e.revision), Array.from({ length: 60 }, (_, i) => i));
    assert.equal(new Set(events.map((e) => e.id)), new Set(results.flatMap((r) => r.appended)));
  } finally {
    await store.close();
  }
});

test("idempotency with 'any' and 'stream_exists', and a partial re-append is a conflict", async () => {
  const store = new SqliteEventStore(join(dir, 'idempotency.db'));
  try {
    const stream = `idem-${randomUUID()}`;
    const batch = [event('A'), event('B')];
    const first = await store.append(stream, batch, { expectedRevision: 'any' });
    assert.equal(await store.append(stream, batch, { expectedRevision: 'any' }), first, 'same result, same position');
    assert.equal(await store.append(stream, batch, { expectedRevision: 'no_stream' }), first);
    assert.equal(await store.append(stream, batch.slice(1), { expectedRevision: 'stream_exists' }), first);
    // Case-insensitive like a UUID: the stored id is the canonical lower-case form.
    assert.equal(await store.append(stream, [{ ...batch[0], id: batch[0].id.toUpperCase() }], { expectedRevision: 'any' }), {
      nextExpectedRevision: 0,
      position: (await store.readStream(stream))[0].position,
    });

    const partial = [batch[1], event('C')];
    try {
      await store.append(stream, partial, { expectedRevision: 'any' });
      assert.unreachable('a partial re-append must fail');
    } catch (error) {
      assert.instance(error, WrongExpectedRevisionError);
    }
    assert.is((await store.readStream(stream)).length, 2);
  } finally {
    await store.close();
  }
});

test('bad arguments are refused before anything is written', async () => {
  const store = new SqliteEventStore(join(dir, 'arguments.db'));
  try {
    const stream = `args-${randomUUID()}`;
    for (const [events, expectedRevision] of [
      [[{ id: 'not-a-uuid', type: 'A', data: {} }], 'any'],
      [[{ id: randomUUID(), type: '', data: {} }], 'any'],
      [[event('A')], -1],
      [[event('A')], 1.5],
    ] as const) {
      try {
        await store.append(stream, [...events], { expectedRevision });
        assert.unreachable(`append should refuse ${JSON.stringify({ events, expectedRevision })}`);
      } catch (error) {
        assert.instance(error, TypeError);
      }
    }
    assert.equal(await store.readStream(stream), []);
    for (const options of [{ after: 'abc' }, { after: '-1' }, { filter: { streamPrefixes: [] } }, { maxCount: -1 }]) {
      try {
        await store.readAll(options);
        assert.unreachable(`readAll should refuse ${JSON.stringify(options)}`);
      } catch (error) {
        assert.instance(error, TypeError);
      }
    }
  } finally {
    await store.close();
  }
});

test('prefix filters match literally (no LIKE wildcards)', async () => {
  const store = new SqliteEventStore(join(dir, 'prefixes.db'));
  try {
    const tag = randomUUID().slice(0, 8);
    await store.append(`${tag}-a_b%-1`, [event('x_%Y')], { expectedRevision: 'any' });
    await store.append(`${tag}-aXbZ-1`, [event('xQZY')], { expectedRevision: 'any' });
    const byStream = await store.readAll({ filter: { streamPrefixes: [`${tag}-a_b%`] } });
    assert.equal(byStream.map((e) => e.streamId), [`${tag}-a_b%-1`]);
    const byType = await store.readAll({ filter: { streamPrefixes: [tag], eventTypePrefixes: ['x_%'] } });
    assert.equal(byType.map((e) => e.type), ['x_%Y']);
  } finally {
    await store.close();
  }
});

test('events and positions survive reopening the file', async () => {
  const file = join(dir, 'reopen.db');
  const stream = `reopen-${randomUUID()}`;
  const first = new SqliteEventStore(file);
  const written = await first.append(stream, [event('A'), event('B')], { expectedRevision: 'no_stream' });
  await first.close();
  const second = new SqliteEventStore(file);
  try {
    const events = await second.readStream(stream);
    assert.equal(events.map((e) => e.type), ['A', 'B']);
    assert.is(events[1].position, written.position);
    const next = await second.append(stream, [event('C')], { expectedRevision: 1 });
    assert.ok(BigInt(next.position) > BigInt(written.position), 'the global order continues after reopening');
    assert.equal((await second.readAll({ after: written.position })).map((e) => e.type), ['C']);
  } finally {
    await second.close();
  }
});

test('close() waits for in-flight handlers and stops subscriptions; an owned connection closes, a borrowed one does not', async () => {
  const db = openDatabase(join(dir, 'borrowed.db'));
  const store = new SqliteEventStore(db);
  const stream = `close-${randomUUID()}`;
  await store.append(stream, [event('A')], { expectedRevision: 'no_stream' });
  const release = deferred();
  const handled: string[] = [];
  store.subscribeAll({ filter: { streamPrefixes: [stream] } }, async (e) => {
    await release.promise;
    handled.push(e.type);
  });
  await settle(50);
  let closed = false;
  const closing = store.close().then(() => {
    closed = true;
  });
  await settle(100);
  assert.is(closed, false, 'close() waits for the running handler');
  release.resolve();
  await closing;
  assert.equal(handled, ['A']);
  assert.is(await store.ping(), false);
  try {
    await store.append(stream, [event('B')], { expectedRevision: 0 });
    assert.unreachable('append after close must fail');
  } catch (error) {
    assert.match(String(error), /closed/);
  }
  assert.ok(db.isOpen, 'a connection passed in stays open');
  assert.is((db.prepare('SELECT count(*) AS n FROM es_events').get() as { n: number }).n, 1);
  db.close();

  const owned = new SqliteEventStore(join(dir, 'owned.db'));
  assert.is(await owned.ping(), true);
  await owned.close();
  assert.is(await owned.ping(), false);
});

test.run();
