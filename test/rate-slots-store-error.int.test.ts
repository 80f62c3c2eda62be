// A store error while a request takes its rate slots (spec, Limits rule 3: rejected requests do
// not count). A send whose workspace slot cannot be inserted (a transient store failure, after
// its development key's slot was taken and the key's window opened) is answered 500 and keeps
// nothing: the key still has its 15 requests, in a window that starts with the first accepted
// request, not with the failed one. And a reservation given back while the store fails for one
// of its slots still gives back the others.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RATE_SLOTS, RateLimiter, ensureRateLimitIndexes } from '../apps/services/rate-limits.ts';
import type { DocumentStore } from '../infra/ports/document-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { basicSend, expectError, harnessRef, startEmbeddedHarness } from './conformance/harness.ts';

const ref = harnessRef(startEmbeddedHarness);
const test = suite('rate slots and store errors');
test.after(() => ref.close());

/**
 * Makes a write of `documents` (the very store object the limiter holds) to the rate slots
 * fail once, for the first slot `picked` names, as a transient failure would (SQLITE_BUSY, a
 * MongoDB failover).
 */
function failOnce(documents: DocumentStore, methods: string[], picked: (id: string) => boolean): { failed: () => boolean; restore: () => void } {
  const original = documents.collection.bind(documents);
  let failed = false;
  documents.collection = ((name: string) => {
    const collection = original(name);
    if (name !== RATE_SLOTS) return collection;
    return new Proxy(collection, {
      get(target, key) {
        const value = Reflect.get(target, key, target) as unknown;
        if (typeof key !== 'string' || !methods.includes(key)) return typeof value === 'function' ? value.bind(target) : value;
        return async (doc: { _id: string } | string, ...rest: unknown[]) => {
          if (!failed && picked(typeof doc === 'string' ? doc : doc._id)) {
            failed = true;
            throw new Error('database is locked');
          }
          return (value as (...args: unknown[]) => Promise<unknown>).call(target, doc, ...rest);
        };
      },
    });
  }) as DocumentStore['collection'];
  return { failed: () => failed, restore: () => (documents.collection = original) };
}

test('a send answered 500 because its workspace slot could not be inserted uses up no development-key slot and opens no window', async () => {
  const h = await ref.get();
  const t = await h.tenant({ environment: 'development' });
  const failure = failOnce(h.instances[0].stores.documents, ['insert'], (id) => id.startsWith('ws:'));
  try {
    expectError(await h.send(t.key, basicSend(t, { subject: 'store error' })), 500, 'internal_error');
    assert.ok(failure.failed(), 'the workspace slot insert failed');
  } finally {
    failure.restore();
  }
  h.clock.advance(30_000);
  const answers: number[] = [];
  for (let i = 0; i < 15; i++) {
    h.clock.advance(10);
    answers.push((await h.send(t.key, basicSend(t, { subject: `after ${i}` }))).statusCode);
  }
  assert.equal(answers, Array(15).fill(202), `the key still has its 15 requests: ${answers.join(' ')}`);
  const refused = expectError(await h.send(t.key, basicSend(t, { subject: 'sixteenth' })), 429, 'rate_limit_exceeded');
  assert.match(refused, /retry in 60 seconds/, 'the window started with the first accepted request, 0.15 s ago, not with the failed one');
});

test('a reservation given back while the store fails for one of its slots gives back the others', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'relay-rate-error-'));
  const documents = new SqliteDocumentStore(join(dir, 'documents.db'));
  await ensureRateLimitIndexes(documents);
  const limiter = new RateLimiter(documents);
  try {
    const subject = { keyId: 'key_error', workspaceId: 'ws_error', environment: 'production' as const };
    const now = new Date('2026-11-22T10:00:00.000Z');
    const reservation = await limiter.reserve(subject, now);
    // The workspace slot, the latest taken, is given back first: that write fails.
    const failure = failOnce(documents, ['replace', 'delete'], (id) => id.startsWith('ws:'));
    await reservation.release();
    failure.restore();
    assert.ok(failure.failed(), 'giving back the workspace slot failed');
    const slots = documents.collection<{ _id: string; scope: string; returned?: boolean }>(RATE_SLOTS);
    assert.is(await slots.count({ scope: 'key:key_error', returned: { ne: true } }), 0, 'the key slot was given back all the same');
    assert.is(await slots.count({ scope: 'ws:ws_error', returned: { ne: true } }), 1, 'the workspace slot stays taken: counted, never exceeded');
  } finally {
    await limiter.close();
    await documents.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test.run();
