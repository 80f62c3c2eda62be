// Batched rebuilds (apps/services/rebuild.ts) give exactly the read model that applying every
// event one at a time gives (EMAILS_PROJECTION.apply, the live projector's path): streams spread
// over many read batches, documents written early and folded again from their stream, a poison
// event in the middle of a stream, events appended while the rebuild reads, and the live
// projector writing during the catch-up after the swap. On the embedded document store (one
// insert at a time) and, with RELAY_MONGODB_URL set, on MongoDB/FerretDB (insertMany).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../domain/email/events.ts';
import { parkedEventId, parkedEventsOf } from '../apps/services/parked-events.ts';
import { EMAILS_PROJECTION, PROJECTIONS } from '../apps/services/projection-registry.ts';
import { rebuildProjection } from '../apps/services/rebuild.ts';
import { listScratch } from '../apps/services/scratch-collections.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { MongoDocumentStore } from '../infra/mongodb/document-store.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import type { EventStore, NewEvent, StoredEvent } from '../infra/ports/event-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { SqliteEventStore } from '../infra/sqlite/event-store.ts';
import { CC_INDEX, TO_INDEX, accepted, attempted, claimed, outcome, suppressed, toNewEvent, unknownEvent } from './support/email-events.ts';
import { broken } from './support/poison-suite.ts';

interface Stores {
  events: EventStore;
  documents: DocumentStore;
  close(): Promise<void>;
}

type Open = () => Promise<Stores>;

async function openEmbedded(): Promise<Stores> {
  const dir = mkdtempSync(join(tmpdir(), 'relay-rebuild-batching-'));
  const events = new SqliteEventStore(join(dir, 'events.db'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  return {
    events, documents,
    async close() {
      await events.close();
      await documents.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function openMongo(baseUrl: string): Open {
  return async () => {
    const url = new URL(baseUrl);
    url.pathname = `/relay_rebuild_${randomBytes(4).toString('hex')}`;
    const dir = mkdtempSync(join(tmpdir(), 'relay-rebuild-batching-'));
    const events = new SqliteEventStore(join(dir, 'events.db'));
    const documents = await MongoDocumentStore.connect(url.toString());
    return {
      events, documents,
      async close() {
        for (const name of COLLECTIONS_USED) await documents.drop(name);
        await documents.close();
        await events.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };
}

/** The collections these tests make, dropped again on a shared server. */
const COLLECTIONS_USED = [COLLECTIONS.emails, 'expected', 'rebuilt', 'rebuilt_twice', COLLECTIONS.parkedEvents, COLLECTIONS.scratchCollections];

let emails = 0;
const nextId = () => `em_batch${++emails}`;
const sent = () => attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent')]);

/**
 * Streams of every shape, appended interleaved so that one email's events lie far apart in
 * the global order. Returns the poison stream's email id.
 */
async function seed(events: EventStore): Promise<{ poisonId: string; count: number }> {
  const plans: Array<{ emailId: string; events: NewEvent[] }> = [];
  for (let i = 0; i < 12; i++) {
    const emailId = nextId();
    const shape = i % 4;
    const list = shape === 0 ? [accepted({ emailId })]
      : shape === 1 ? [accepted({ emailId }), claimed(), sent()]
        : shape === 2 ? [suppressed([{ address: 'ann@example.test', reason: 'hard_bounce' }], { emailId })]
          : [accepted({ emailId }), unknownEvent(), claimed(), sent()];
    plans.push({ emailId, events: list.map(toNewEvent) });
  }
  // Lifecycle events of an email whose admission is missing: no document.
  plans.push({ emailId: nextId(), events: [toNewEvent(claimed()), toNewEvent(sent())] });
  // A poison event in the middle: what follows it in that stream cannot be applied either.
  const poisonId = nextId();
  plans.push({ emailId: poisonId, events: [toNewEvent(accepted({ emailId: poisonId })), toNewEvent(claimed()), broken('DeliveryAttempted'), toNewEvent(sent())] });
  let count = 0;
  for (let round = 0; plans.some((p) => p.events.length > round); round++) {
    for (const plan of plans) {
      const event = plan.events[round];
      if (!event) continue;
      await events.append(emailStreamId(plan.emailId), [event], { expectedRevision: round === 0 ? 'no_stream' : round - 1 });
      count++;
    }
  }
  return { poisonId, count };
}

async function allEvents(events: EventStore): Promise<StoredEvent[]> {
  return events.readAll({ filter: { streamPrefixes: ['email-'] } });
}

/** The model the live path builds: every event applied one at a time; failures skipped. */
async function projectOneByOne(stores: Stores, list: StoredEvent[], collection: string): Promise<number> {
  let failed = 0;
  for (const event of list) {
    try {
      await EMAILS_PROJECTION.apply(stores.documents, stores.events, event, collection);
    } catch {
      failed++;
    }
  }
  return failed;
}

async function snapshot(documents: DocumentStore, collection: string): Promise<Map<string, unknown>> {
  const docs = await documents.collection<{ _id: string }>(collection).find({ orderBy: [['_id', 'asc']], limit: 10_000 });
  return new Map(docs.map(({ _v, ...doc }) => [doc._id, doc]));
}

function assertSameModel(actual: Map<string, unknown>, expected: Map<string, unknown>): void {
  assert.equal([...actual.keys()], [...expected.keys()], 'the same documents');
  for (const [id, doc] of expected) assert.equal(actual.get(id), doc, `document ${id}`);
}

/** The event store, but `before` runs (once) ahead of the `at`-th readAll. */
function withHookOnRead(events: EventStore, at: number, before: () => Promise<void>): EventStore {
  let calls = 0;
  return new Proxy(events, {
    get(target, property) {
      if (property === 'readAll') {
        return async (options: Parameters<EventStore['readAll']>[0]) => {
          if (++calls === at) await before();
          return target.readAll(options);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** The document store, but `after` runs (once) right after a rename. */
function withHookOnRename(documents: DocumentStore, after: () => Promise<void>): DocumentStore {
  let done = false;
  return new Proxy(documents, {
    get(target, property) {
      if (property === 'rename') {
        return async (from: string, to: string) => {
          await target.rename(from, to);
          if (!done) {
            done = true;
            await after();
          }
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

function batchingSuite(name: string, open: Open | null): void {
  const test = suite(`batched rebuild (${name})`);
  if (!open) {
    console.log(`skipped ${name}: RELAY_MONGODB_URL is not set (start the engines: eval "$(bash infra/engines/engines.sh up)")`);
    test.skip('skipped: no server', () => {});
    test.run();
    return;
  }
  let stores: Stores;
  test.before.each(async () => {
    stores = await open();
  });
  test.after.each(async () => {
    await stores.close();
  });

  test('into a scratch collection, in small batches with few documents held, it equals applying every event one at a time', async () => {
    const { poisonId, count } = await seed(stores.events);
    const list = await allEvents(stores.events);
    assert.is(list.length, count);
    const failed = await projectOneByOne(stores, list, 'expected');
    // Read 4 events at a time and hold at most 3 documents: most are written early and folded again.
    const result = await rebuildProjection(stores.documents, stores.events, PROJECTIONS.emails, { name: 'emails', into: 'rebuilt', batchSize: 4, maxHeld: 3, attempts: 1 });
    const expected = await snapshot(stores.documents, 'expected');
    assertSameModel(await snapshot(stores.documents, 'rebuilt'), expected);
    assert.is(result.events, count);
    assert.is(result.documents, expected.size);
    assert.is(result.skipped, failed, 'skipped exactly what fails one at a time');
    assert.is(failed, 2, 'the poison event and the one after it');
    assert.ok(result.skippedEvents.every((e) => e.streamId === emailStreamId(poisonId)));
    for (const e of result.skippedEvents) assert.ok(await parkedEventsOf(stores.documents).get(parkedEventId('rebuild.emails', e.eventId)), 'parked');
    assert.equal((await listScratch(stores.documents)).map((s) => [s._id, s.state]), [['rebuilt', 'built']]);

    // Large batches, everything held: the same model.
    const again = await rebuildProjection(stores.documents, stores.events, PROJECTIONS.emails, { name: 'emails', into: 'rebuilt_twice', attempts: 1 });
    assertSameModel(await snapshot(stores.documents, 'rebuilt_twice'), expected);
    assert.is(again.documents, expected.size);
  });

  test('events appended while the rebuild reads, to old and new streams, are in the rebuilt model', async () => {
    await seed(stores.events);
    const lateId = nextId();
    const earlyStream = (await allEvents(stores.events)).find((e) => e.type === 'EmailAccepted')!.streamId;
    const earlyRevision = (await stores.events.readStream(earlyStream)).length - 1;
    // Counting takes the first reads; the append lands in the middle of the fold.
    const events = withHookOnRead(stores.events, 30, async () => {
      await stores.events.append(earlyStream, [toNewEvent(unknownEvent('EmailOpened'))], { expectedRevision: earlyRevision });
      await stores.events.append(emailStreamId(lateId), [toNewEvent(accepted({ emailId: lateId })), toNewEvent(claimed())], { expectedRevision: 'no_stream' });
    });
    const result = await rebuildProjection(stores.documents, events, PROJECTIONS.emails, { name: 'emails', into: 'rebuilt', batchSize: 2, maxHeld: 2, attempts: 1 });
    const list = await allEvents(stores.events);
    await projectOneByOne(stores, list, 'expected');
    const expected = await snapshot(stores.documents, 'expected');
    assert.ok(expected.has(lateId));
    assertSameModel(await snapshot(stores.documents, 'rebuilt'), expected);
    assert.is(result.events, list.length, 'the appended events were read');
    assert.is(result.documents, expected.size);
  });

  test('with the swap: events the live projector applies and events only the catch-up applies both end up in the swapped-in model', async () => {
    await seed(stores.events);
    await projectOneByOne(stores, await allEvents(stores.events), COLLECTIONS.emails);
    const byProjector = nextId();
    const byCatchUp = nextId();
    const documents = withHookOnRename(stores.documents, async () => {
      await stores.events.append(emailStreamId(byProjector), [toNewEvent(accepted({ emailId: byProjector })), toNewEvent(claimed())], { expectedRevision: 'no_stream' });
      await stores.events.append(emailStreamId(byCatchUp), [toNewEvent(accepted({ emailId: byCatchUp }))], { expectedRevision: 'no_stream' });
      // The live projector gets to one of them first (and half-way), writing the swapped-in collection.
      const [first] = await stores.events.readStream(emailStreamId(byProjector));
      await EMAILS_PROJECTION.apply(stores.documents, stores.events, first, COLLECTIONS.emails);
    });
    const result = await rebuildProjection(documents, stores.events, PROJECTIONS.emails, { name: 'emails', batchSize: 3, attempts: 1 });
    assert.is(result.swapped, true);
    const list = await allEvents(stores.events);
    await projectOneByOne(stores, list, 'expected');
    const expected = await snapshot(stores.documents, 'expected');
    assert.ok(expected.has(byProjector) && expected.has(byCatchUp));
    assertSameModel(await snapshot(stores.documents, COLLECTIONS.emails), expected);
    assert.is(result.documents, expected.size);
    assert.equal(await listScratch(stores.documents), [], 'nothing left behind');
  });

  test('a rebuild that fails before the swap drops its scratch collection and keeps the live one', async () => {
    await seed(stores.events);
    await projectOneByOne(stores, await allEvents(stores.events), COLLECTIONS.emails);
    const live = await snapshot(stores.documents, COLLECTIONS.emails);
    let scratch = '';
    const failing = withHookOnRead(stores.events, 12, async () => {
      scratch = (await listScratch(stores.documents))[0]?._id ?? '';
      throw new Error('the event store went away');
    });
    // Reads fail while the event store still answers ping: not an event's fault, an outage of the read itself.
    try {
      await rebuildProjection(stores.documents, failing, PROJECTIONS.emails, { name: 'emails', batchSize: 2 });
      assert.unreachable('the rebuild should fail');
    } catch (error) {
      assert.match((error as Error).message, /went away/);
    }
    assert.match(scratch, /^emails__rebuild_\d+$/, 'the rebuild had a scratch collection');
    assert.equal(await listScratch(stores.documents), [], 'its record is gone');
    assert.is(await stores.documents.collection(scratch).count(), 0, 'and so are its documents');
    assertSameModel(await snapshot(stores.documents, COLLECTIONS.emails), live);
  });

  test.run();
}

batchingSuite('embedded document store', openEmbedded);
const mongoUrl = process.env.RELAY_MONGODB_URL?.trim();
batchingSuite('MongoDB document store', mongoUrl ? openMongo(mongoUrl) : null);
