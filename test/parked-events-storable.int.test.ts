// Parking never fails on what it records (apps/services/parked-events.ts), so a poison event
// always lets its partition move on (apps/processors/processor.ts): the failure's message is
// stored without NUL (a driver's message may quote the key it failed on, and PostgreSQL's jsonb
// holds no \u0000) or lone surrogates, and bounded, on every store; other control characters
// stay (the CLI escapes them: cli-terminal-escapes.int.test.ts); a record a store refuses all
// the same is written again with ids and counts only; a
// store that takes no park at all is an outage (retried, the processor `recovering`), and the
// event is parked once it takes one. The stores' refusals are made by a wrapper here: no store
// refuses a storable record, which is the point.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { emailStreamId } from '../domain/email/events.ts';
import { MongoDocumentStore } from '../infra/mongodb/document-store.ts';
import type { Collection, DocumentStore } from '../infra/ports/document-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { startForwarder } from '../apps/pipeline/forwarder.ts';
import { startProcessor, type ProcessorDefinition, type RunningProcessor } from '../apps/processors/processor.ts';
import { emailProjector } from '../apps/processors/registry.ts';
import { groupOf } from '../apps/pipeline/topics.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { parkEvent, parkedEventId, parkedEventsOf, UNSTORED_ERROR, type ParkedEvent, type Parking } from '../apps/services/parked-events.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { accepted, toNewEvent } from './support/email-events.ts';
import { waitUntil } from './support/eventually.ts';
import { emailIdOnPartition } from './support/poison-suite.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const REFUSED = 'the store refused this record';

/**
 * `store` whose parked_events collection refuses, on insert and replace, the documents `refuses`
 * picks (as a store refuses content it cannot hold); every other call goes through.
 */
function refusingParks(store: DocumentStore, refuses: (doc: ParkedEvent) => boolean): DocumentStore {
  return new Proxy(store, {
    get(target, prop) {
      if (prop === 'collection') {
        return (name: string) => {
          const collection = target.collection(name);
          if (name !== COLLECTIONS.parkedEvents) return collection;
          return new Proxy(collection, {
            get(inner, method) {
              const value = Reflect.get(inner, method) as unknown;
              if (typeof value !== 'function') return value;
              if (method !== 'insert' && method !== 'replace') return value.bind(inner);
              return async (doc: ParkedEvent, ...rest: unknown[]) => {
                if (refuses(doc)) throw new Error(`${REFUSED}: ${doc._id}`);
                return (value as (...args: unknown[]) => unknown).call(inner, doc, ...rest);
              };
            },
          }) as Collection<never>;
        };
      }
      const value = Reflect.get(target, prop) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const parking = (error: Error, eventId = randomBytes(6).toString('hex')): Parking => ({
  processor: 'projector', group: 'relay.projector', error, attempts: 5,
  event: { id: eventId, streamId: `email-em_${eventId}`, revision: 0, position: '12', type: 'EmailAccepted' },
  firstFailedAt: new Date('2025-01-01T00:00:00.000Z'), lastFailedAt: new Date('2025-01-01T00:00:01.000Z'),
  record: { topic: 'relay.events', partition: 3, offset: '41' },
});


interface Opened {
  store: DocumentStore;
  close(): Promise<void>;
}

function withDatabase(url: string, database: string): string {
  const match = /^(mongodb(?:\+srv)?:\/\/[^/?#]*)(?:\/[^?#]*)?(.*)$/i.exec(url);
  if (!match) throw new Error(`RELAY_MONGODB_URL is not a mongodb URL: ${url}`);
  return `${match[1]}/${database}${match[2]}`;
}

const mongoUrl = process.env.RELAY_MONGODB_URL?.trim();
const STORES: Array<{ name: string; skip?: string; open: () => Promise<Opened> }> = [
  {
    name: 'sqlite',
    open: async () => {
      const dir = mkdtempSync(join(tmpdir(), 'relay-parked-storable-'));
      const store = new SqliteDocumentStore(join(dir, 'documents.db'));
      return { store, close: async () => { await store.close(); rmSync(dir, { recursive: true, force: true }); } };
    },
  },
  {
    name: 'mongodb',
    skip: mongoUrl ? undefined : 'RELAY_MONGODB_URL is not set (eval "$(bash infra/engines/engines.sh up)" starts FerretDB)',
    open: async () => {
      const database = `relay_parked_${randomBytes(6).toString('hex')}`;
      const store = await MongoDocumentStore.connect(withDatabase(mongoUrl!, database));
      return {
        store,
        close: async () => {
          await store.close();
          const admin = await MongoClient.connect(mongoUrl!);
          try {
            await admin.db(database).dropDatabase();
          } finally {
            await admin.close();
          }
        },
      };
    },
  },
];

for (const { name, skip, open } of STORES) {
  const test = skippableSuite<{ opened: Opened }>(`parked events: what a park records is storable [${name}]`, skip);

  test.before(async (ctx) => {
    ctx.opened = await open();
  });

  test.after(async (ctx) => {
    await ctx.opened?.close();
  });

  test('the error is stored without NUL or lone surrogates, and bounded', async (ctx) => {
    const { store } = ctx.opened;
    // What the MongoDB driver says of a key holding NUL, with more a message may quote.
    const quoted = 'key a\u0000b must not contain null bytes; then\u0001\u001b\u007f\u0085 a tab\there, a line\nbreak, lone \ud800 and \udc00, a pair 😀';
    const parked = await parkEvent(store, parking(new Error(quoted)));
    assert.is(parked.error, 'key a\ufffdb must not contain null bytes; then\u0001\u001b\u007f\u0085 a tab\there, a line\nbreak, lone \ufffd and \ufffd, a pair 😀');
    assert.equal(await parkedEventsOf(store).get(parked._id), parked, 'stored as returned');

    // Longer than the bound, with a surrogate pair across the cut.
    const long = await parkEvent(store, parking(new Error(`${'\u0000'.repeat(300)}${'x'.repeat(1699)}😀${'y'.repeat(5000)}`)));
    assert.is(long.error.length, 2001);
    assert.ok(long.error.endsWith('x\ufffd…'), 'the cut pair\'s half replaced');
    const stored = (await parkedEventsOf(store).get(long._id))!;
    assert.is(stored.error, long.error);
    for (const error of [parked.error, stored.error]) {
      assert.not.ok(error.includes('\u0000'));
      assert.ok(error.isWellFormed());
    }
  });

  test('a record the store refuses is written with ids and counts only; a store that takes none throws its refusal', async (ctx) => {
    const { store } = ctx.opened;
    const picky = refusingParks(store, (doc) => doc.error.includes('poison text'));
    const first = parking(new Error('cannot apply: poison text'));
    const parked = await parkEvent(picky, first);
    assert.equal(parked, {
      _id: parkedEventId(first.group, first.event.id), processor: 'projector', group: 'relay.projector', eventId: first.event.id,
      streamId: first.event.streamId, revision: 0, position: '12', type: null, error: UNSTORED_ERROR, attempts: 5,
      firstFailedAt: '2025-01-01T00:00:00.000Z', lastFailedAt: '2025-01-01T00:00:01.000Z', topic: 'relay.events', partition: 3, offset: '41',
      retryRequestedAt: null, _v: 1,
    });
    assert.equal(await parkedEventsOf(store).get(parked._id), parked);
    // Parked again (a retry that failed again): the attempts add up, whichever record is written.
    const again = await parkEvent(picky, { ...first, attempts: 2 });
    assert.is(again.attempts, 7);
    assert.is(again.error, UNSTORED_ERROR);
    const storable = await parkEvent(picky, { ...first, error: new Error('cannot apply: plain text'), attempts: 1 });
    assert.is(storable.attempts, 8);
    assert.is(storable.error, 'cannot apply: plain text');
    assert.is(storable.type, 'EmailAccepted');

    const closed = refusingParks(store, () => true);
    const refused = parking(new Error('cannot apply'));
    try {
      await parkEvent(closed, refused);
      assert.unreachable('a store that takes no park');
    } catch (error) {
      assert.match((error as Error).message, REFUSED);
    }
    assert.is(await parkedEventsOf(store).get(parkedEventId(refused.group, refused.event.id)), null);
  });

  test.run();
}

// The projector on the embedded stores, with parks refused by the wrapper above.
const runner = suite<{ dataDir: string; t: TestApp; stops: Array<() => Promise<void>> }>('parked events: a park the store refuses does not hold the partition');

runner.before.each(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-parked-refused-'));
  ctx.t = await startTestApp({}, { dataDir: ctx.dataDir });
  ctx.stops = [];
  const { events, log, documents } = ctx.t.stores;
  const forwarder = await startForwarder({ events, log, documents, namespace: ctx.t.config.logNamespace });
  ctx.stops.push(() => forwarder.stop());
});

runner.after.each(async (ctx) => {
  for (const stop of ctx.stops.reverse()) await stop();
  await ctx.t.close();
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

/** The projector on `documents`, throwing `message` on the events of `poisoned`; its failures go to `errors`. */
async function projector(ctx: { t: TestApp; stops: Array<() => Promise<void>> }, documents: DocumentStore, poisoned: Set<string>, message: string, errors: string[]): Promise<RunningProcessor> {
  const { t } = ctx;
  const running = await startProcessor({
    ...emailProjector,
    handle: async (event, runtime, deps) => {
      if (poisoned.has(event.id)) throw new Error(message);
      await emailProjector.handle(event, runtime as never, deps);
    },
  } as ProcessorDefinition, {
    config: t.config, events: t.stores.events, documents, log: t.stores.log, services: t.ctx.services, now: () => t.clock.now(),
    onError: (error) => errors.push(error.message), onWarning: () => {},
  });
  ctx.stops.push(() => running.stop());
  return running;
}

const projected = (t: TestApp, emailId: string) => t.stores.documents.collection(COLLECTIONS.emails).get(emailId).then((doc) => doc !== null);

runner('a poison event whose park the store refuses is parked with ids and counts only, and the next email of its partition is projected', async (ctx) => {
  const { t } = ctx;
  const errors: string[] = [];
  const documents = refusingParks(t.stores.documents, (doc) => doc.error.includes('poison text'));
  const poison = toNewEvent(accepted({ emailId: emailIdOnPartition(2) }));
  const running = await projector(ctx, documents, new Set([poison.id]), 'cannot apply: poison text', errors);
  await t.stores.events.append(emailStreamId((poison.data as { emailId: string }).emailId), [poison], { expectedRevision: 'no_stream' });
  const next = emailIdOnPartition(2);
  await t.stores.events.append(emailStreamId(next), [toNewEvent(accepted({ emailId: next }))], { expectedRevision: 'no_stream' });

  const refusals = () => errors.filter((message) => message.includes(REFUSED)).length;
  // The positive marker either way: the next email projected, or the park refused again and again.
  await waitUntil(async () => (await projected(t, next)) || refusals() >= 3, 'the next email is projected, or its park is refused three times', 60_000);
  assert.ok(await projected(t, next), `the next email of the partition is not projected; the park was refused ${refusals()} times: ${errors.at(-1)}`);
  const parked = await parkedEventsOf(t.stores.documents).get(parkedEventId(groupOf(t.config.logNamespace, 'projector'), poison.id));
  assert.ok(parked, 'parked');
  assert.is(parked!.error, UNSTORED_ERROR);
  assert.is(parked!.attempts, 5);
  assert.is(parked!.eventId, poison.id);
  assert.is(running.status().parked, 1);
  assert.is(running.status().stuck, null);
  assert.is(running.parts.get('projector')!.snapshot().state, 'running');
});

runner('a store that takes no park is an outage: the processor is recovering, and the event is parked once the store takes it', async (ctx) => {
  const { t } = ctx;
  const errors: string[] = [];
  let refusing = true;
  const documents = refusingParks(t.stores.documents, () => refusing);
  const poison = toNewEvent(accepted({ emailId: emailIdOnPartition(6) }));
  const running = await projector(ctx, documents, new Set([poison.id]), 'cannot apply', errors);
  const liveness = running.parts.get('projector')!;
  await t.stores.events.append(emailStreamId((poison.data as { emailId: string }).emailId), [poison], { expectedRevision: 'no_stream' });

  await waitUntil(() => errors.some((message) => message.includes('could not be parked')), 'a park refused');
  assert.ok(errors.find((message) => message.includes('could not be parked'))!.includes(REFUSED), 'the refusal is told');
  assert.is(liveness.snapshot().state, 'recovering');
  const id = parkedEventId(groupOf(t.config.logNamespace, 'projector'), poison.id);
  assert.is(await parkedEventsOf(t.stores.documents).get(id), null);

  refusing = false;
  await waitUntil(async () => (await parkedEventsOf(t.stores.documents).get(id)) !== null, 'parked at its next failure', 30_000);
  const parked = (await parkedEventsOf(t.stores.documents).get(id))!;
  assert.is(parked.error, 'cannot apply', 'the failure itself, now that the store takes it');
  assert.is(parked.attempts, 6, 'the failures counted before the refused park and the one after');
  await waitUntil(() => liveness.snapshot().state === 'running', 'running again once parked');
  assert.is(running.status().stuck, null);
});

runner.run();
