// The shared rate limiter on a real document store: several limiters (several API
// processes, each with its own connection and hints) never let a window hold more than its
// limit, reuse slots given back by each other, and agree on when a development window began.
// On the embedded store, and on the MongoDB adapter when RELAY_MONGODB_URL names a server
// (FerretDB from infra/engines: two clients, as two API processes would have).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RATE_SLOTS, RATE_WINDOWS, RateLimiter, ensureRateLimitIndexes, type RateLimiterOptions, type RateReservation, type RateSubject } from '../apps/services/rate-limits.ts';
import { RelayError } from '../domain/errors.ts';
import { MongoDocumentStore } from '../infra/mongodb/document-store.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { settle, waitUntil } from './support/eventually.ts';
import { seeded } from './support/history.ts';

const T = Date.parse('2026-11-22T10:00:00.000Z');
const at = (ms: number) => new Date(T + ms);

let subjects = 0;
const dev = (): RateSubject => ({ keyId: `key_dev_${++subjects}`, workspaceId: `ws_${subjects}`, environment: 'development' });
const live = (workspaceId = `ws_${++subjects}`): RateSubject => ({ keyId: `key_live_${++subjects}`, workspaceId, environment: 'production' });

/** A send's reservation, answered at once (kept) unless `decided` is false: then the test keeps or releases it. */
async function attempt(limiter: RateLimiter, subject: RateSubject, now: Date, decided = true): Promise<RateReservation | RelayError> {
  try {
    const reservation = await limiter.reserve(subject, now);
    if (decided) reservation.keep();
    return reservation;
  } catch (error) {
    if (error instanceof RelayError && error.code === 'rate_limit_exceeded') return error;
    throw error;
  }
}
const granted = (results: Array<RateReservation | RelayError>) => results.filter((r) => !(r instanceof RelayError)) as RateReservation[];
/** A send admitted: its reservation kept. */
async function admitted(limiter: RateLimiter, subject: RateSubject, now: Date): Promise<RateReservation> {
  const reservation = await limiter.reserve(subject, now);
  reservation.keep();
  return reservation;
}

/** `documents`, recording each call to a collection's methods as "<collection>.<method>" in `calls`. */
function watched(documents: DocumentStore, calls: string[]): DocumentStore {
  return new Proxy(documents, {
    get(target, property, receiver) {
      if (property !== 'collection') return Reflect.get(target, property, receiver);
      return (name: string) => new Proxy(target.collection(name), {
        get(coll, method, r) {
          const value = Reflect.get(coll, method, r);
          return typeof value === 'function' ? (...args: unknown[]) => (calls.push(`${name}.${String(method)}`), value.apply(coll, args)) : value;
        },
      });
    },
  });
}

interface TwoProcesses {
  docsA: DocumentStore;
  docsB: DocumentStore;
  close(): Promise<void>;
}

function register(label: string, open: () => Promise<TwoProcesses>): void {
  const test = suite(`rate limiter (${label}, several processes)`);
  let docsA: DocumentStore;
  let docsB: DocumentStore;
  let close = async () => {};

  test.before(async () => {
    ({ docsA, docsB, close } = await open());
    await ensureRateLimitIndexes(docsA);
  });
  test.after(async () => close());
  // Each test's limiters stop at its end: a sweeper left running would judge later tests'
  // slots by its own (fake) clock.
  const running: RateLimiter[] = [];
  const limiter = (documents: DocumentStore, options?: RateLimiterOptions) => {
    const made = new RateLimiter(documents, options);
    running.push(made);
    return made;
  };
  test.after.each(async () => {
    for (const made of running.splice(0)) await made.close();
  });

  test('two limiters racing on one development key grant exactly 15 of 40', async () => {
    const limiters = [limiter(docsA), limiter(docsB)];
    const subject = dev();
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => attempt(limiters[i % 2], subject, at(i))));
    assert.is(granted(results).length, 15);
    const refused = results.find((r) => r instanceof RelayError) as RelayError;
    assert.match(refused.message, /retry in \d+ seconds?/);
    assert.ok(Number(refused.details.retryAfterSeconds) >= 1);
  });

  test('two limiters on one production workspace grant 100 per key and 200 per workspace within a second', async () => {
    const limiters = [limiter(docsA), limiter(docsB)];
    const keys = [live('ws_shared'), live('ws_shared'), live('ws_shared')];
    const results = await Promise.all(Array.from({ length: 330 }, (_, i) => attempt(limiters[i % 2], keys[i % 3], at(i % 1000))));
    assert.is(granted(results).length, 200);
    const slots = await docsA.collection<{ _id: string; scope: string }>(RATE_SLOTS).count({ scope: 'ws:ws_shared' });
    assert.is(slots, 200);
    // The next second is a new window.
    assert.ok(!((await attempt(limiters[0], keys[0], at(1000))) instanceof RelayError));
  });

  test('two processes reserving and giving back at random never hold more than the limit, and use every slot once both want more', async () => {
    for (const seed of [1, 2, 3]) {
      const random = seeded(seed);
      const limiters = [limiter(docsA), limiter(docsB)];
      const subject = live();
      const held: RateReservation[] = [];
      const base = 4_000_000 + seed * 10_000;
      for (let step = 0; step < 300; step++) {
        // Bursts of reservations from one process, with some given back (rejected later) on the way.
        const burst = Array.from({ length: 1 + Math.floor(random() * 6) }, () => attempt(limiters[random() < 0.5 ? 0 : 1], subject, at(base + step)));
        held.push(...granted(await Promise.all(burst)));
        if (held.length > 0 && random() < 0.4) await held.splice(Math.floor(random() * held.length), 1)[0].release();
        assert.ok(held.length <= 100, `seed ${seed}, step ${step}: ${held.length} held`);
      }
      const last = await Promise.all(Array.from({ length: 240 }, (_, i) => attempt(limiters[i % 2], subject, at(base + 300))));
      held.push(...granted(last));
      assert.is(held.length, 100, `seed ${seed}: every slot of the key's second in use`);
    }
  });

  test('a slot given back in one process is taken by a request in another', async () => {
    const a = limiter(docsA);
    const b = limiter(docsB);
    const subject = dev();
    const held = granted(await Promise.all(Array.from({ length: 15 }, (_, i) => attempt(a, subject, at(i)))));
    assert.is(held.length, 15);
    assert.instance(await attempt(b, subject, at(100)), RelayError);
    await held[4].release();
    await held[9].release();
    assert.not.instance(await attempt(b, subject, at(200)), RelayError);
    assert.not.instance(await attempt(b, subject, at(300)), RelayError);
    assert.instance(await attempt(a, subject, at(400)), RelayError);
  });

  test('a request finding the window full of its process\'s undecided slots waits: it takes one given back, and is refused once the rest are kept', async () => {
    const calls: string[] = [];
    const a = limiter(watched(docsA, calls), { undecidedWaitMs: 60_000 });
    const subject = dev();
    const held = granted(await Promise.all(Array.from({ length: 15 }, (_, i) => attempt(a, subject, at(i), false))));
    assert.is(held.length, 15);

    let first: RateReservation | RelayError | undefined;
    calls.length = 0;
    const firstDone = attempt(a, subject, at(100), false).then((r) => (first = r));
    // It checked its window; this process holds every slot of it, so there is nothing given back
    // by another process to look for: it waits.
    await waitUntil(() => calls.includes(`${RATE_WINDOWS}.get`), 'the window is checked');
    await settle(50);
    assert.is(first, undefined, 'not refused while undecided slots fill the window');
    assert.not.ok(calls.includes(`${RATE_SLOTS}.find`), 'no look at a window whose every slot this process holds');
    await held[3].release(); // a rejection
    await firstDone;
    assert.not.instance(first, RelayError, 'the slot given back is taken by the waiting request');

    // Another one waits (up to a minute) while slots are undecided, and is refused as soon as
    // the last of them is kept.
    calls.length = 0;
    const waitStarted = performance.now();
    const second = attempt(a, subject, at(30_000));
    await waitUntil(() => calls.includes(`${RATE_WINDOWS}.get`), 'the window is checked again');
    await settle(50);
    for (const [i, reservation] of held.entries()) if (i !== 3) reservation.keep();
    (first as RateReservation).keep();
    assert.instance(await second, RelayError, 'refused once every slot of the window is kept');
    assert.ok(performance.now() - waitStarted < 5_000, 'woken by the last keep');

    const started = performance.now();
    assert.instance(await attempt(a, subject, at(30_001)), RelayError);
    assert.ok(performance.now() - started < 5_000, 'a window full of kept slots is refused without waiting');
  });

  test('a request waits for undecided slots only so long, then is refused', async () => {
    const a = limiter(docsA, { undecidedWaitMs: 50 });
    const subject = dev();
    const held = granted(await Promise.all(Array.from({ length: 15 }, (_, i) => attempt(a, subject, at(i), false))));
    assert.is(held.length, 15);
    const started = performance.now();
    assert.instance(await attempt(a, subject, at(100)), RelayError);
    assert.ok(performance.now() - started >= 45, 'it waited');
    await Promise.all(held.map((r) => r.release()));
  });

  test('a development window opens with the first granted request and lasts 60 s, for every process', async () => {
    const a = limiter(docsA);
    const b = limiter(docsB);
    const subject = dev();
    await admitted(a, subject, at(10_000));
    for (let i = 0; i < 14; i++) await admitted(b, subject, at(30_000 + i));
    const refused = (await attempt(a, subject, at(69_999))) as RelayError;
    assert.instance(refused, RelayError);
    assert.is(refused.details.retryAfterSeconds, 1);
    assert.not.instance(await attempt(b, subject, at(70_000)), RelayError, 'a new window at 10 s + 60 s');
  });

  test('a window opened by a request that is then given back never started', async () => {
    const a = limiter(docsA);
    const subject = dev();
    const rejected = await a.reserve(subject, at(0));
    await rejected.release();
    assert.is(await docsA.collection(RATE_WINDOWS).count({ scope: `key:${subject.keyId}` }), 0);
    await admitted(a, subject, at(50_000));
    for (let i = 0; i < 14; i++) await admitted(a, subject, at(70_000));
    const refused = (await attempt(a, subject, at(70_000))) as RelayError;
    assert.instance(refused, RelayError);
    assert.is(refused.details.retryAfterSeconds, 40, 'the window runs from 50 s, not from 0 s');
  });

  test('a window whose opener is given back while other requests hold slots in it is deleted by the last release, in whichever process', async () => {
    const a = limiter(docsA);
    const b = limiter(docsB);
    const subject = dev();
    const windows = () => docsA.collection(RATE_WINDOWS).count({ scope: `key:${subject.keyId}` });
    const opener = await a.reserve(subject, at(0));
    const others = [await b.reserve(subject, at(10)), await b.reserve(subject, at(20)), await a.reserve(subject, at(30))];
    await opener.release();
    assert.is(await windows(), 1, 'requests still undecided in it: it may yet start');
    await others[0].release();
    await others[2].release();
    assert.is(await windows(), 1, 'a request still undecided in it, in the other process');
    await others[1].release();
    assert.is(await windows(), 0, 'every request in it was rejected: it never started');
    await admitted(b, subject, at(50_000));
    for (let i = 0; i < 14; i++) await admitted(a, subject, at(70_000));
    const refused = (await attempt(a, subject, at(70_000))) as RelayError;
    assert.instance(refused, RelayError);
    assert.is(refused.details.retryAfterSeconds, 40, 'the window runs from the first kept request, 50 s, not from 0 s');
  });

  test('a window in which a request is kept stays when the others are given back', async () => {
    const a = limiter(docsA);
    const b = limiter(docsB);
    const subject = dev();
    const opener = await a.reserve(subject, at(0));
    const kept = await b.reserve(subject, at(10));
    const last = await a.reserve(subject, at(20));
    kept.keep();
    await opener.release();
    await last.release();
    assert.is(await docsA.collection(RATE_WINDOWS).count({ scope: `key:${subject.keyId}` }), 1);
    for (let i = 0; i < 14; i++) await admitted(a, subject, at(30_000));
    const refused = (await attempt(b, subject, at(30_000))) as RelayError;
    assert.instance(refused, RelayError, 'the kept request counts in its window');
    assert.is(refused.details.retryAfterSeconds, 30);
  });

  test('a request refused by the workspace gives back its key slot', async () => {
    const a = limiter(docsA);
    const filler = live('ws_full');
    const second = live('ws_full');
    for (let i = 0; i < 100; i++) await admitted(a, filler, at(5_000));
    for (let i = 0; i < 100; i++) await admitted(a, second, at(5_000));
    const blocked = live('ws_full');
    for (let i = 0; i < 3; i++) assert.instance(await attempt(a, blocked, at(5_000)), RelayError);
    assert.is(await docsA.collection(RATE_SLOTS).count({ scope: `key:${blocked.keyId}` }), 0);
  });

  test('a timer, not the requests, sweeps away the slots of windows long gone, until close', async () => {
    const a = limiter(docsA, { sweepEveryMs: 20 });
    const slots = docsA.collection(RATE_SLOTS);
    const first = live();
    await a.reserve(first, at(1_000_000));
    await settle(100); // several sweeps
    assert.is(await slots.count({ scope: `key:${first.keyId}` }), 1, 'a window just gone keeps its slots a while');
    const second = live();
    await a.reserve(second, at(1_000_000 + 10 * 60_000));
    await waitUntil(async () => (await slots.count({ scope: `key:${first.keyId}` })) === 0, 'the old slot is swept');
    assert.is(await slots.count({ scope: `key:${second.keyId}` }), 1);
    await a.close();
    await a.reserve(live(), at(1_000_000 + 20 * 60_000));
    await settle(100);
    assert.is(await slots.count({ scope: `key:${second.keyId}` }), 1, 'no sweep after close');
  });

  test('a request in a window with room only inserts: one slot per policy, nothing read or counted', async () => {
    const calls: string[] = [];
    const a = limiter(watched(docsA, calls));
    const subject = live();
    for (let i = 0; i < 5; i++) await a.reserve(subject, at(2_000_000 + i));
    assert.equal(calls, Array.from({ length: 5 }, () => [`${RATE_SLOTS}.insert`, `${RATE_SLOTS}.insert`]).flat());
    await a.close();
  });

  test.run();
}

register('sqlite document store', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-rate-'));
  const docsA = new SqliteDocumentStore(join(dir, 'documents.db'));
  const docsB = new SqliteDocumentStore(join(dir, 'documents.db'));
  return {
    docsA,
    docsB,
    async close() {
      await docsA.close();
      await docsB.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

const mongoUrl = process.env.RELAY_MONGODB_URL?.trim();
if (mongoUrl) {
  register('mongodb document store', async () => {
    const url = new URL(mongoUrl);
    url.pathname = `/relay_rate_${randomBytes(5).toString('hex')}`;
    const docsA = await MongoDocumentStore.connect(url.toString());
    const docsB = await MongoDocumentStore.connect(url.toString());
    return {
      docsA,
      docsB,
      async close() {
        for (const name of [RATE_SLOTS, RATE_WINDOWS]) await docsA.drop(name);
        await docsA.close();
        await docsB.close();
      },
    };
  });
} else {
  console.log('skip: rate limiter on the mongodb document store: RELAY_MONGODB_URL is not set (eval "$(bash infra/engines/engines.sh up)" starts FerretDB)');
}
