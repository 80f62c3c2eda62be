// A later page of a webhook endpoint's deliveries (GET /v1/webhook-endpoints/{id}/deliveries?cursor=…,
// the dashboard's "Older deliveries") starts its read at the cursor and reads about a page, however
// far back it is. endpointDeliveries (apps/services/webhooks/deliveries.ts) pages on (endpointId asc,
// createdAt desc, _id desc) with the endpoint fixed by the where clause, so
// infra/sqlite/document-query.ts (findTail) bounds createdAt, the first field of the order the where
// clause leaves free, with a range (`createdAt <= ?`; the deliveries without one are read after) that
// the index doc_webhook_deliveries__endpoint seeks to, beside the exact keyset condition (an OR,
// which SQLite does not seek on).
//
// Why it matters: node:sqlite is synchronous, so a page that walked the endpoint's deliveries from
// the newest down to the cursor would hold the event loop of the whole process for a time growing
// with how far back it is (page k costing k pages); finished deliveries are kept 30 days
// (domain/retention.ts), millions for a busy endpoint.
//
// The plan SQLite makes for the very statement the route runs (captured as it runs, then explained
// on the same file) says which it is whatever the machine: its first step seeks by `createdAt<?`.
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { WebhookDelivery } from '../apps/services/webhooks/deliveries.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { listStatementsOf, planOf, type RanStatement } from './support/query-plans.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const DELIVERIES = 100_000;
const TABLE = 'doc_webhook_deliveries';

interface Ctx { t: TestApp; member: Caller; endpointId: string; file: DatabaseSync }

const test = suite<Ctx>('webhook deliveries: a later page');

const deliveryId = (i: number) => `whd_${String(i).padStart(22, '0')}`;

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_WEBHOOK_ALLOW: 'localhost:443' });
  ctx.member = await newCaller(ctx.t, 'webhook-pages@example.test');
  const { projectId } = await workspaceWithProject(ctx.t, ctx.member, 'production');
  const made = await call(ctx.t, 'POST', `/v1/projects/${projectId}/webhook-endpoints`, { as: ctx.member, body: { url: 'https://localhost/relay', events: ['email.sent', 'email.delivered'] } });
  assert.is(made.statusCode, 201, made.body);
  const endpointId = ctx.endpointId = made.json().id as string;
  // The endpoint's history as the fan-out writes it, one delivery a second, each attempted once.
  const deliveries = ctx.t.ctx.documents.collection<WebhookDelivery>(COLLECTIONS.webhookDeliveries);
  const start = Date.now() - DELIVERIES * 1000;
  for (let from = 0; from < DELIVERIES; from += 5_000) {
    await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, DELIVERIES - from) }, (_, j) => {
      const i = from + j;
      const at = new Date(start + i * 1000).toISOString();
      return deliveries.insert({
        _id: deliveryId(i), emailId: `em_${i}`, projectId, endpointId, eventId: `ev_${i}`, type: 'email.delivered', body: '{}',
        status: 'succeeded', attempts: 1, nextAttemptAt: null, attemptLogs: [{ number: 1, httpStatus: 200, errorCode: null, durationMs: 12, createdAt: at }],
        disableGeneration: 0, createdAt: at, updatedAt: at,
      } as WebhookDelivery);
    })));
  }
  ctx.file = new DatabaseSync(join(ctx.t.config.dataDir, 'relay.db'), { readOnly: true });
});

test.after(async ({ t, file }) => {
  file?.close();
  await t?.close();
});

/** A page read by a member, the statements over the deliveries table it ran, and how long it took. */
async function page(ctx: Ctx, query: string): Promise<{ ran: RanStatement[]; ids: string[]; ms: number }> {
  const { result, ran } = await listStatementsOf(TABLE, async () => {
    const began = performance.now();
    const response = await call(ctx.t, 'GET', `/v1/webhook-endpoints/${ctx.endpointId}/deliveries${query}`, { as: ctx.member });
    const ms = performance.now() - began;
    assert.is(response.statusCode, 200, response.body);
    return { ids: (response.json() as { deliveries: Array<{ id: string }> }).deliveries.map((d) => d.id), ms };
  });
  return { ran, ...result };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

test('a page near the oldest delivery starts its read at the cursor', async (ctx) => {
  const first = await page(ctx, '?limit=10');
  assert.equal(first.ids, Array.from({ length: 10 }, (_, i) => deliveryId(DELIVERIES - 1 - i)), 'the first page, newest first');
  // The positive marker: the later page is the right one.
  const cursor = deliveryId(30);
  const later = await page(ctx, `?limit=10&cursor=${cursor}`);
  assert.equal(later.ids, Array.from({ length: 10 }, (_, i) => deliveryId(29 - i)), 'the page after the cursor');
  assert.is(later.ran.length, 1, `one read of the page: ${later.ran.map((r) => r.sql).join('\n')}`);
  const plan = planOf(ctx.file, later.ran[0]);
  const times = { first: [] as number[], later: [] as number[] };
  for (let i = 0; i < 5; i++) {
    times.first.push((await page(ctx, '?limit=10')).ms);
    times.later.push((await page(ctx, `?limit=10&cursor=${cursor}`)).ms);
  }
  const shown = `${plan.join(' | ')} (median over ${DELIVERIES.toLocaleString('en')} deliveries: the page near the oldest ${median(times.later).toFixed(1)} ms, ` +
    `the first page ${median(times.first).toFixed(1)} ms)`;
  assert.ok(plan[0].startsWith('SEARCH '), `the read seeks: ${shown}`);
  assert.match(plan[0], /createdAt<\?/, `the seek starts at the cursor, not at the endpoint's newest delivery: ${shown}`);
  assert.not.ok(plan.some((step) => step.includes('TEMP B-TREE')), `the order comes from the index: ${shown}`);
});

test.run();
