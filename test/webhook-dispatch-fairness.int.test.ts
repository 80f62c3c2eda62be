// The webhooks processor's dispatcher (apps/processors/webhooks.ts, as its init builds it) on
// the embedded document store: a slow endpoint at its bound of requests in flight, with more
// deliveries due than one read of the schedule holds (2 × 64), never delays another endpoint's
// deliveries, and the dispatcher does not read the schedule again and again while everything
// due waits for that endpoint. The egress is a stand-in: the slow endpoints' requests answer
// only when the test lets them.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Dispatcher } from '../apps/pipeline/dispatcher.ts';
import { deliveriesOf } from '../apps/services/webhooks/deliveries.ts';
import type { Collection, DocumentStore, FindOptions } from '../infra/ports/document-store.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';
import * as support from './support/webhook-dispatch.ts';
import { dueAt, OK, startWebhookDispatcher, stopAnswering } from './support/webhook-dispatch.ts';

const PER_ENDPOINT = 4;

interface Context {
  dir: string;
  documents: SqliteDocumentStore;
  secrets: SecretBox;
  /** Reads of due deliveries (each look makes one per range of endpoints it reads). */
  dueReads: number;
  /** Requests made, by endpoint URL host. */
  posted: string[];
  /** The slow endpoints' requests, answered when resolved. */
  held: Array<Deferred<AttemptResult>>;
  errors: Error[];
}

const test = suite<Context>('webhooks dispatcher: one endpoint\'s backlog never delays another\'s');

test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-fairness-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
  ctx.dueReads = 0;
  ctx.posted = [];
  ctx.held = [];
  ctx.errors = [];
});

test.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const at = dueAt;
const addEndpoint = (ctx: Context, id: string) => support.addEndpoint(ctx.documents, ctx.secrets, id, 'prj_1');
const addDelivery = (ctx: Context, id: string, endpointId: string, due: string) => support.addDelivery(ctx.documents, id, endpointId, 'prj_1', due);

/** The store, counting the reads of due deliveries. */
function counting(ctx: Context): DocumentStore {
  return new Proxy(ctx.documents, {
    get(target, name) {
      if (name !== 'collection') return Reflect.get(target, name, target);
      return (collectionName: string) => {
        const collection = target.collection(collectionName) as Collection<{ _id: string }>;
        return new Proxy(collection, {
          get(inner, method) {
            const value = Reflect.get(inner, method, inner);
            if (method !== 'find') return typeof value === 'function' ? value.bind(inner) : value;
            return (options?: FindOptions) => {
              const due = options?.where?.nextAttemptAt;
              if (due && typeof due === 'object' && 'lte' in due) ctx.dueReads++;
              return inner.find(options);
            };
          },
        });
      };
    },
  });
}

/** The processor's dispatcher, as `relay processor webhooks` starts it; requests to `slow` endpoints are held. */
function startWebhooks(ctx: Context, slow: Set<string>): Promise<Dispatcher> {
  return startWebhookDispatcher({
    documents: counting(ctx), secrets: ctx.secrets, errors: ctx.errors,
    post: (post) => {
      const endpoint = new URL(String(post.url)).hostname.split('.')[0];
      ctx.posted.push(endpoint);
      if (!slow.has(endpoint)) return Promise.resolve(OK);
      const answer = deferred<AttemptResult>();
      ctx.held.push(answer);
      return answer.promise;
    },
  });
}

const stop = (ctx: Context, dispatcher: Dispatcher) => stopAnswering(dispatcher, ctx.held);

const statusOf = async (ctx: Context, id: string) => (await deliveriesOf(ctx.documents).get(id))?.status;

test('a fast endpoint\'s delivery is made at once behind 200 older ones of a slow endpoint at its bound; meanwhile the schedule is read at the poll, not in a loop', async (ctx) => {
  await addEndpoint(ctx, 'slow');
  await addEndpoint(ctx, 'fast');
  for (let i = 0; i < 200; i++) await addDelivery(ctx, `whd_slow_${String(i).padStart(3, '0')}`, 'slow', at(i));
  await addDelivery(ctx, 'whd_fast', 'fast', at(1_000));
  const dispatcher = await startWebhooks(ctx, new Set(['slow']));
  try {
    await waitUntil(async () => (await statusOf(ctx, 'whd_fast')) === 'succeeded', 'the fast endpoint\'s delivery succeeded', 5_000);
    assert.is(ctx.posted.filter((e) => e === 'slow').length, PER_ENDPOINT, 'the slow endpoint kept to its bound');

    // Everything due now waits for the slow endpoint: the loop sleeps until a run ends or the
    // poll (250 ms), where one that takes a due time already past for news looks every 5 ms.
    const before = ctx.dueReads;
    const since = Date.now();
    await waitUntil(() => Date.now() - since >= 1_000 && ctx.dueReads > before, 'a second passed and the dispatcher read the schedule again');
    // Two reads a look (the endpoints before and after the slow one), a look per poll.
    const reads = ctx.dueReads - before;
    const elapsed = Date.now() - since;
    assert.ok(reads <= 2 * (Math.ceil(elapsed / 250) + 2), `${reads} reads of due deliveries in ${elapsed} ms`);
    assert.is(ctx.posted.filter((e) => e === 'slow').length, PER_ENDPOINT, 'nothing more started for the slow endpoint');
  } finally {
    await stop(ctx, dispatcher);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
});

test('slow endpoints at their bound on either side of the fast ones (by id): each fast endpoint\'s delivery is made', async (ctx) => {
  const slow = ['ep_b', 'ep_d', 'ep_f'];
  const fast = ['ep_a', 'ep_c', 'ep_e', 'ep_g'];
  for (const id of [...slow, ...fast]) await addEndpoint(ctx, id);
  // 390 slow deliveries, taking turns, all due before any fast one.
  for (let i = 0; i < 130; i++) {
    for (const [n, endpoint] of slow.entries()) await addDelivery(ctx, `whd_${endpoint}_${String(i).padStart(3, '0')}`, endpoint, at(3 * i + n));
  }
  for (const [n, endpoint] of fast.entries()) await addDelivery(ctx, `whd_${endpoint}`, endpoint, at(1_000 + n));
  const dispatcher = await startWebhooks(ctx, new Set(slow));
  try {
    for (const endpoint of fast) {
      await waitUntil(async () => (await statusOf(ctx, `whd_${endpoint}`)) === 'succeeded', `${endpoint}'s delivery succeeded`, 5_000);
    }
    for (const endpoint of slow) assert.is(ctx.posted.filter((e) => e === endpoint).length, PER_ENDPOINT, `${endpoint} kept to its bound`);
  } finally {
    await stop(ctx, dispatcher);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
});

test('a slow endpoint at its bound whose due deliveries fill the whole first look: the fast endpoint\'s delivery behind them is still made', async (ctx) => {
  await addEndpoint(ctx, 'slow');
  await addEndpoint(ctx, 'fast');
  // More than the first look reads (4 × 2 × 64 rows of the due window): the ranges between skipped endpoints find the fast one.
  for (let i = 0; i < 600; i++) await addDelivery(ctx, `whd_slow_${String(i).padStart(3, '0')}`, 'slow', at(i));
  await addDelivery(ctx, 'whd_fast', 'fast', at(1_000));
  const dispatcher = await startWebhooks(ctx, new Set(['slow']));
  try {
    await waitUntil(async () => (await statusOf(ctx, 'whd_fast')) === 'succeeded', 'the fast endpoint\'s delivery succeeded', 5_000);
    assert.is(ctx.posted.filter((e) => e === 'slow').length, PER_ENDPOINT, 'the slow endpoint kept to its bound');
  } finally {
    await stop(ctx, dispatcher);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
});

test.run();
