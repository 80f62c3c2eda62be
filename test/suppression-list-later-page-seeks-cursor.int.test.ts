// A later page of a workspace's suppression list (GET /v1/workspaces/{id}/suppressions?cursor=…, the
// dashboard's "Next page", and every page of GET …/suppressions/export) starts its read at the
// cursor and reads about a page, wherever the page is in the list. listSuppressions
// (apps/services/management/suppressions.ts) pages on (workspaceId asc, _id asc) with the workspace
// fixed by the where clause, so infra/sqlite/document-query.ts (findTail) bounds _id, the first field
// of the order the where clause leaves free, with a range (`id >= ?`) the index
// doc_suppressions__workspace seeks to, beside the exact keyset condition (an OR, which SQLite does
// not seek on).
//
// Why it matters: node:sqlite is synchronous, so a page that walked the workspace's entries from the
// first address up to the cursor would hold the event loop of the whole process for a time growing
// with its position in the list (page k costing k pages, an export the square of the list), and a
// suppression list holds every hard bounce and complaint of the workspace's history.
//
// The plan SQLite makes for the very statement the route runs (captured as it runs, then explained
// on the same file) says which it is whatever the machine: its first step seeks by `id>?`.
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { SuppressionEntry } from '../domain/management.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { listStatementsOf, planOf, type RanStatement } from './support/query-plans.ts';
import { call, newCaller, workspaceWithProject, type Caller } from './support/management.ts';

const ENTRIES = 100_000;
const TABLE = 'doc_suppressions';

interface Ctx { t: TestApp; member: Caller; workspaceId: string; file: DatabaseSync }

const test = suite<Ctx>('suppression list: a later page');

const addressOf = (i: number) => `user${String(i).padStart(7, '0')}@example.org`;

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  const owner = await newCaller(ctx.t, 'suppression-pages@example.test');
  ctx.member = owner;
  const { workspaceId } = await workspaceWithProject(ctx.t, owner, 'production');
  ctx.workspaceId = workspaceId;
  // The list as the suppressor writes it: one entry per hard-bounced address, keyed by workspace and address.
  const entries = ctx.t.ctx.documents.collection<SuppressionEntry>(COLLECTIONS.suppressions);
  const at = new Date().toISOString();
  for (let from = 0; from < ENTRIES; from += 5_000) {
    await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, ENTRIES - from) }, (_, j) => {
      const address = addressOf(from + j);
      return entries.insert({ _id: `${workspaceId}:${address}`, workspaceId, address, reason: 'hard_bounce', emailId: `em_${from + j}`, createdAt: at, lastEventId: `ev_${from + j}` });
    })));
  }
  ctx.file = new DatabaseSync(join(ctx.t.config.dataDir, 'relay.db'), { readOnly: true });
});

test.after(async ({ t, file }) => {
  file?.close();
  await t?.close();
});

/** A page read by a member, the statements over the suppressions table it ran, and how long it took. */
async function page(ctx: Ctx, query: string): Promise<{ ran: RanStatement[]; addresses: string[]; next: string | null; ms: number }> {
  const { result, ran } = await listStatementsOf(TABLE, async () => {
    const began = performance.now();
    const response = await call(ctx.t, 'GET', `/v1/workspaces/${ctx.workspaceId}/suppressions${query}`, { as: ctx.member });
    const ms = performance.now() - began;
    assert.is(response.statusCode, 200, response.body);
    const body = response.json() as { suppressions: Array<{ address: string }>; next_cursor: string | null };
    return { addresses: body.suppressions.map((s) => s.address), next: body.next_cursor, ms };
  });
  return { ran, ...result };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

test('a page near the end of the list starts its read at the cursor', async (ctx) => {
  const first = await page(ctx, '?limit=10');
  assert.equal(first.addresses, Array.from({ length: 10 }, (_, i) => addressOf(i)), 'the first page, in address order');
  // The positive marker: the later page is the right one.
  const cursor = addressOf(ENTRIES - 20);
  const later = await page(ctx, `?limit=10&cursor=${encodeURIComponent(cursor)}`);
  assert.equal(later.addresses, Array.from({ length: 10 }, (_, i) => addressOf(ENTRIES - 19 + i)), 'the page after the cursor');
  assert.is(later.ran.length, 1, `one read of the list: ${later.ran.map((r) => r.sql).join('\n')}`);
  const plan = planOf(ctx.file, later.ran[0]);
  const times = { first: [] as number[], later: [] as number[] };
  for (let i = 0; i < 5; i++) {
    times.first.push((await page(ctx, '?limit=10')).ms);
    times.later.push((await page(ctx, `?limit=10&cursor=${encodeURIComponent(cursor)}`)).ms);
  }
  const shown = `${plan.join(' | ')} (median over ${ENTRIES.toLocaleString('en')} entries: the page near the end ${median(times.later).toFixed(1)} ms, ` +
    `the first page ${median(times.first).toFixed(1)} ms)`;
  assert.ok(plan[0].startsWith('SEARCH '), `the read seeks: ${shown}`);
  assert.match(plan[0], /\bid>\?/, `the seek starts at the cursor, not at the workspace's first address: ${shown}`);
  assert.not.ok(plan.some((step) => step.includes('TEMP B-TREE')), `the order comes from the index: ${shown}`);
});

test.run();
