// The webhooks processor's dispatcher (apps/processors/webhooks.ts, as its init builds it) on the
// embedded store: endpoints known to be slow (a request of theirs timed out) hold at most half of
// the requests in flight (32 of 64), however many of their deliveries are due before
// others', so another project's delivery starts while they hang. An endpoint is known slow once a
// request of its ended slowly: the first requests to a new hanging endpoint may take every slot
// until they time out, and these tests let them time out (a stand-in egress reports `timeout`, as
// the real one does after 15 s) before the hanging that must not starve anyone. The hanging
// endpoints are spread over projects that each stay within a project's own share of the requests
// in flight (16 of 64: webhook-project-share.int.test.ts).
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { Dispatcher } from '../apps/pipeline/dispatcher.ts';
import { deliveriesOf } from '../apps/services/webhooks/deliveries.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';
import { SecretBox } from '../infra/secrets/secret-box.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import { deferred, waitUntil, type Deferred } from './support/eventually.ts';
import * as support from './support/webhook-dispatch.ts';
import { dueAt, OK, startWebhookDispatcher, stopAnswering } from './support/webhook-dispatch.ts';

/** What the egress reports for a request that hit the attempt's 15 s limit. */
const TIMED_OUT: AttemptResult = { httpStatus: null, errorCode: 'timeout', durationMs: 15_000, responseSnippet: null };
/** The processor's requests in flight, its bound per endpoint, the share slow endpoints may hold (half) and a project's (a quarter). */
const CONCURRENCY = 64;
const PER_ENDPOINT = 4;
const SLOW_SHARE = CONCURRENCY / 2;
const PROJECT_SHARE = CONCURRENCY / 4;

interface Context {
  dir: string;
  documents: SqliteDocumentStore;
  secrets: SecretBox;
  /** Requests to slow endpoints, answered when resolved. */
  held: Array<Deferred<AttemptResult>>;
  /** Requests made to each endpoint (by host). */
  posted: Map<string, number>;
  errors: Error[];
}
const test = suite<Context>('webhooks: slow endpoints hold at most half of the requests in flight');

test.before.each((ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-webhook-slow-'));
  ctx.documents = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  ctx.secrets = new SecretBox({ current: randomBytes(32), previous: [] });
  ctx.held = [];
  ctx.posted = new Map();
  ctx.errors = [];
});
test.after.each(async (ctx) => {
  await ctx.documents.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

const at = dueAt;
const addEndpoint = (ctx: Context, id: string, projectId: string) => support.addEndpoint(ctx.documents, ctx.secrets, id, projectId);
const addDelivery = (ctx: Context, id: string, endpointId: string, projectId: string, due: string) => support.addDelivery(ctx.documents, id, endpointId, projectId, due);

/**
 * The processor's dispatcher; `answer` says how a request to an endpoint of the slow project
 * goes (given how many that endpoint had before it): a result at once, or null to hold it.
 */
function startWebhooks(ctx: Context, slowProject: string, answer: (before: number) => AttemptResult | null): Promise<Dispatcher> {
  return startWebhookDispatcher({
    documents: ctx.documents, secrets: ctx.secrets, errors: ctx.errors,
    post: (post) => {
      const host = new URL(String(post.url)).hostname;
      const before = ctx.posted.get(host) ?? 0;
      ctx.posted.set(host, before + 1);
      if (!host.startsWith(slowProject)) return Promise.resolve(OK);
      const result = answer(before);
      if (result) return Promise.resolve(result);
      const held = deferred<AttemptResult>();
      ctx.held.push(held);
      return held.promise;
    },
  });
}

const stop = (ctx: Context, dispatcher: Dispatcher) => stopAnswering(dispatcher, ctx.held);

/** Waits until the dispatcher has looked at the schedule `looks` more times. */
async function looksPass(dispatcher: Dispatcher, looks: number): Promise<void> {
  for (let i = 0; i < looks; i++) {
    const last = dispatcher.status().lastLookAt;
    await waitUntil(() => dispatcher.status().lastLookAt !== last, 'the dispatcher looked at the schedule again', 5_000);
  }
}

const statusOf = async (ctx: Context, id: string) => (await deliveriesOf(ctx.documents).get(id))?.status;
const unanswered = (ctx: Context) => ctx.held.length;

test('16 hanging endpoints of four projects, once their requests timed out, hold half of the slots; another project\'s delivery is made meanwhile', async (ctx) => {
  const slowEndpoints = 16;
  const projects = 4;
  assert.is(slowEndpoints * PER_ENDPOINT, CONCURRENCY, 'enough to take every slot');
  assert.is((slowEndpoints / projects) * PER_ENDPOINT, PROJECT_SHARE, 'each project within its own share');
  for (let e = 0; e < slowEndpoints; e++) {
    const id = `prja-ep${String(e).padStart(2, '0')}`;
    const projectId = `prja${e % projects}`;
    await addEndpoint(ctx, id, projectId);
    // A backlog of 10 emails' events each, all due before project B's.
    for (let i = 0; i < 10; i++) await addDelivery(ctx, `whd_${id}_${i}`, id, projectId, at(i * 100 + e));
  }
  await addEndpoint(ctx, 'prjb-fast', 'prjb');
  await addDelivery(ctx, 'whd_prjb', 'prjb-fast', 'prjb', at(5_000));
  const dispatcher = await startWebhooks(ctx, 'prja', () => null);
  try {
    // Nothing is known of the A projects' endpoints yet: their first requests take every slot...
    await waitUntil(() => unanswered(ctx) === CONCURRENCY, 'the first requests to the A projects\' endpoints hang', 5_000);
    // ... until they time out, which makes each endpoint slow.
    for (const held of ctx.held.splice(0)) held.resolve(TIMED_OUT);
    // Their backlog (96 deliveries) is still due before project B's, and every request hangs again.
    await waitUntil(async () => (await statusOf(ctx, 'whd_prjb')) === 'succeeded',
      'project B\'s delivery was made while project A\'s endpoints hang', 5_000);
    await looksPass(dispatcher, 2);
    assert.is(unanswered(ctx), SLOW_SHARE, 'the slow endpoints hold half of the slots, no more, and use them');
  } finally {
    await stop(ctx, dispatcher);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
});

test('slow endpoints that cannot start, with more deliveries due than a read of the schedule holds, are left out of the read: another project\'s delivery is made', async (ctx) => {
  // 40 endpoints (two projects' worth, over ten projects, so that no project reaches its share
  // before slow endpoints hold theirs), each known slow after one request that timed out.
  const slowEndpoints = 40;
  const ids = Array.from({ length: slowEndpoints }, (_, e) => `prja-ep${String(e).padStart(2, '0')}`);
  const projectOf = (e: number) => `prja${e % 10}`;
  for (const [e, id] of ids.entries()) {
    await addEndpoint(ctx, id, projectOf(e));
    await addDelivery(ctx, `whd_${id}_first`, id, projectOf(e), at(e));
  }
  const dispatcher = await startWebhooks(ctx, 'prja', () => null);
  try {
    await waitUntil(() => unanswered(ctx) === slowEndpoints, 'a request to each endpoint hangs', 5_000);
    for (const held of ctx.held.splice(0)) held.resolve(TIMED_OUT);
    await waitUntil(async () => (await deliveriesOf(ctx.documents).count({ status: 'pending', attempts: 1 })) === slowEndpoints, 'each timed out', 5_000);

    // Then a backlog of 20 deliveries each, endpoint after endpoint, all due before project B's:
    // 8 endpoints take the slow endpoints' 32 slots, and the other 32 endpoints' 640 deliveries
    // would fill every read of 128 due deliveries in front of project B's.
    for (const [e, id] of ids.entries()) {
      for (let i = 0; i < 20; i++) await addDelivery(ctx, `whd_${id}_${String(i).padStart(2, '0')}`, id, projectOf(e), at(1_000 + e * 100 + i));
    }
    await addEndpoint(ctx, 'prjb-fast', 'prjb');
    await addDelivery(ctx, 'whd_prjb', 'prjb-fast', 'prjb', at(10_000));
    dispatcher.kick();
    await waitUntil(async () => (await statusOf(ctx, 'whd_prjb')) === 'succeeded',
      'project B\'s delivery was made while 40 slow endpoints have deliveries due', 5_000);
    await looksPass(dispatcher, 2);
    assert.is(unanswered(ctx), SLOW_SHARE, 'the slow endpoints hold half of the slots, no more');
  } finally {
    await stop(ctx, dispatcher);
  }
  assert.equal(ctx.errors.map((e) => e.message), [], 'no run failed');
});

test.run();
