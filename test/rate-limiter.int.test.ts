// The shared rate limiter on a real document store: several limiters (several API
// processes, each with its own connection and hints) never let a window hold more than its
// limit, reuse slots given back by each other, and agree on when a development window began.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RATE_SLOTS, RATE_WINDOWS, RateLimiter, ensureRateLimitIndexes, type RateReservation, type RateSubject } from '../apps/services/rate-limits.ts';
import { RelayError } from '../domain/errors.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';

const test = suite('rate limiter (sqlite document store, several processes)');
const dir = mkdtempSync(join(tmpdir(), 'relay-rate-'));
const docsA = new SqliteDocumentStore(join(dir, 'documents.db'));
const docsB = new SqliteDocumentStore(join(dir, 'documents.db'));
const T = Date.parse('2026-11-22T10:00:00.000Z');
const at = (ms: number) => new Date(T + ms);

test.before(async () => ensureRateLimitIndexes(docsA));
test.after(async () => {
  await docsA.close();
  await docsB.close();
  rmSync(dir, { recursive: true, force: true });
});

let subjects = 0;
const dev = (): RateSubject => ({ keyId: `key_dev_${++subjects}`, workspaceId: `ws_${subjects}`, environment: 'development' });
const live = (workspaceId = `ws_${++subjects}`): RateSubject => ({ keyId: `key_live_${++subjects}`, workspaceId, environment: 'production' });

async function attempt(limiter: RateLimiter, subject: RateSubject, now: Date): Promise<RateReservation | RelayError> {
  try {
    return await limiter.reserve(subject, now);
  } catch (error) {
    if (error instanceof RelayError && error.code === 'rate_limit_exceeded') return error;
    throw error;
  }
}
const granted = (results: Array<RateReservation | RelayError>) => results.filter((r) => !(r instanceof RelayError)) as RateReservation[];

test('two limiters racing on one development key grant exactly 15 of 40', async () => {
  const limiters = [new RateLimiter(docsA), new RateLimiter(docsB)];
  const subject = dev();
  const results = await Promise.all(Array.from({ length: 40 }, (_, i) => attempt(limiters[i % 2], subject, at(i))));
  assert.is(granted(results).length, 15);
  const refused = results.find((r) => r instanceof RelayError) as RelayError;
  assert.match(refused.message, /retry in \d+ seconds?/);
  assert.ok(Number(refused.details.retryAfterSeconds) >= 1);
});

test('two limiters on one production workspace grant 100 per key and 200 per workspace within a second', async () => {
  const limiters = [new RateLimiter(docsA), new RateLimiter(docsB)];
  const keys = [live('ws_shared'), live('ws_shared'), live('ws_shared')];
  const results = await Promise.all(Array.from({ length: 330 }, (_, i) => attempt(limiters[i % 2], keys[i % 3], at(i % 1000))));
  assert.is(granted(results).length, 200);
  const slots = await docsA.collection<{ _id: string; scope: string }>(RATE_SLOTS).count({ scope: 'ws:ws_shared' });
  assert.is(slots, 200);
  // The next second is a new window.
  assert.ok(!((await attempt(limiters[0], keys[0], at(1000))) instanceof RelayError));
});

test('a slot given back in one process is taken by a request in another', async () => {
  const a = new RateLimiter(docsA);
  const b = new RateLimiter(docsB);
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

test('a development window opens with the first granted request and lasts 60 s, for every process', async () => {
  const a = new RateLimiter(docsA);
  const b = new RateLimiter(docsB);
  const subject = dev();
  await a.reserve(subject, at(10_000));
  for (let i = 0; i < 14; i++) await b.reserve(subject, at(30_000 + i));
  const refused = (await attempt(a, subject, at(69_999))) as RelayError;
  assert.instance(refused, RelayError);
  assert.is(refused.details.retryAfterSeconds, 1);
  assert.not.instance(await attempt(b, subject, at(70_000)), RelayError, 'a new window at 10 s + 60 s');
});

test('a window opened by a request that is then given back never started', async () => {
  const a = new RateLimiter(docsA);
  const subject = dev();
  const rejected = await a.reserve(subject, at(0));
  await rejected.release();
  assert.is(await docsA.collection(RATE_WINDOWS).count({ scope: `key:${subject.keyId}` }), 0);
  await a.reserve(subject, at(50_000));
  for (let i = 0; i < 14; i++) await a.reserve(subject, at(70_000));
  const refused = (await attempt(a, subject, at(70_000))) as RelayError;
  assert.instance(refused, RelayError);
  assert.is(refused.details.retryAfterSeconds, 40, 'the window runs from 50 s, not from 0 s');
});

test('a request refused by the workspace gives back its key slot', async () => {
  const a = new RateLimiter(docsA);
  const filler = live('ws_full');
  const second = live('ws_full');
  for (let i = 0; i < 100; i++) await a.reserve(filler, at(5_000));
  for (let i = 0; i < 100; i++) await a.reserve(second, at(5_000));
  const blocked = live('ws_full');
  for (let i = 0; i < 3; i++) assert.instance(await attempt(a, blocked, at(5_000)), RelayError);
  assert.is(await docsA.collection(RATE_SLOTS).count({ scope: `key:${blocked.keyId}` }), 0);
});

test('slots of windows long gone are swept away', async () => {
  const a = new RateLimiter(docsA);
  const subject = live();
  await a.reserve(subject, at(1_000_000));
  await a.close(); // lets the sweep that this first request started finish
  const slots = docsA.collection(RATE_SLOTS);
  assert.is(await slots.count({ scope: `key:${subject.keyId}` }), 1);
  await a.reserve(live(), at(1_000_000 + 10 * 60_000));
  await a.close();
  assert.is(await slots.count({ scope: `key:${subject.keyId}` }), 0);
});

test.run();
