// A filtered GET /v1/emails on the embedded store must seek the filter's index and read about a
// page, not walk the project's emails testing each one: node:sqlite is synchronous, so a walk
// holds the event loop for every tenant, and a project's history only grows. The query plan
// says which it is whatever the data, so this asserts the plan SQLite makes for the very
// statement a real list read runs (captured as it runs, then explained on the same file): the
// filter's index with the project and the filter as its first columns, the order taken from the
// index (no temporary b-tree), and no scan of the emails. The time it saves is measured by
// test/bench/email-list-filters.bench.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import type { IndexSpec } from '../infra/ports/document-store.ts';
import { SqliteDocumentStore } from '../infra/sqlite/document-store.ts';
import type { EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { listStatementsOf, planOf, type RanStatement } from './support/query-plans.ts';
import { waitUntil } from './support/eventually.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, sendEmail, type TemplateWorld } from './support/templates.ts';

const EMAILS = 300;
const EMAILS_TABLE = 'doc_emails';

const test = suite<{ t: TestApp; w: TemplateWorld; real: EmailView; file: DatabaseSync }>('email list filters: the plans of their reads');

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { processors: ['projector'] });
  ctx.w = await populateTemplateWorld(ctx.t);
  const sent = await sendEmail(ctx.t, ctx.w.apiKey, { from: `app@${ctx.w.domain}`, to: `ann@${ctx.w.domain}`, subject: 'Receipt', text: 'x' });
  assert.is(sent.statusCode, 202, sent.body);
  const emails = ctx.t.ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  let view: EmailView | null = null;
  await waitUntil(async () => (view = await emails.get(sent.json().id)) !== null, 'projected');
  const { _v, ...real } = view! as EmailView & { _v: number };
  void _v;
  ctx.real = real;
  // A history, as the projector writes it (copies of the real view), so the reads find pages.
  const start = Date.parse(real.createdAt) - EMAILS * 1000;
  await Promise.all(Array.from({ length: EMAILS }, (_, i) => emails.insert({
    ...real,
    _id: `em_seed${String(i).padStart(15, '0')}`,
    createdAt: new Date(start + i * 1000).toISOString(),
    toAddresses: [`customer${i}@${ctx.w.domain}`, `ann@${ctx.w.domain}`],
  })));
  ctx.file = new DatabaseSync(join(ctx.t.config.dataDir, 'relay.db'), { readOnly: true });
});

test.after(async ({ t, file }) => {
  file?.close();
  await t?.close();
});

/** The statements over the emails table that a list read runs, as it runs them. */
async function listStatements(ctx: { t: TestApp; w: TemplateWorld }, query: string): Promise<{ ran: RanStatement[]; body: { emails: Array<{ id: string }>; next_cursor: string | null } }> {
  const { result, ran } = await listStatementsOf(EMAILS_TABLE, async () => {
    const response = await ctx.t.app.inject({ method: 'GET', url: `/v1/emails${query}`, headers: { authorization: `Bearer ${ctx.w.apiKey}` } });
    assert.is(response.statusCode, 200, response.body);
    return { body: response.json() };
  });
  return { ran, ...result };
}


const FILTERS: Array<{ query: string; index: string; seek: RegExp }> = [
  { query: 'status=complained', index: `${EMAILS_TABLE}__project_status`, seek: /\(field:projectId=\? AND field:status=\?/ },
  { query: 'sender=nobody@acme.test', index: `${EMAILS_TABLE}__project_sender`, seek: /\(field:projectId=\? AND field:fromAddress=\?/ },
  { query: 'domain=other.test', index: `${EMAILS_TABLE}__project_domain`, seek: /\(field:projectId=\? AND field:fromDomain=\?/ },
  // The To addresses are an array: its index keeps each address apart.
  { query: 'recipient=nobody@acme.test', index: `array:${EMAILS_TABLE}__project_recipient/keys`, seek: /\(key:projectId=\? AND each:toAddresses=\? AND type:toAddresses=\?/ },
];

const WINDOW = 'after=2000-01-01T00:00:00Z&before=2999-01-01T00:00:00Z';

function assertSeeks(plan: string[], index: string, seek: RegExp, label: string): void {
  const shown = `${label}: ${plan.join(' | ')}`;
  assert.ok(plan.length > 0, shown);
  // The first step drives the read: the filter's index, sought by the project and the filter.
  assert.ok(plan[0].startsWith(`SEARCH `) && plan[0].includes(` INDEX ${index} `), `the filter's index leads: ${shown}`);
  assert.match(plan[0], seek, `sought by the project and the filter: ${shown}`);
  assert.not.ok(plan.some((step) => step.includes('TEMP B-TREE')), `the order comes from the index: ${shown}`);
  assert.not.ok(plan.some((step) => step.startsWith('SCAN ')), `nothing is scanned: ${shown}`);
  assert.not.ok(plan.some((step) => step.includes('project_created')), `not the project's whole history: ${shown}`);
}

for (const { query, index, seek } of FILTERS) {
  test(`?${query}: the first page seeks ${index}`, async (ctx) => {
    const { ran } = await listStatements(ctx, `?${query}`);
    assert.is(ran.length, 1, `one read of the list: ${ran.map((r) => r.sql).join('\n')}`);
    assertSeeks(planOf(ctx.file, ran[0]), index, seek, query);
  });

  test(`?${query} within a window of dates, and on a later page, still seeks ${index}`, async (ctx) => {
    const windowed = await listStatements(ctx, `?${query}&${WINDOW}`);
    assertSeeks(planOf(ctx.file, windowed.ran[0]), index, seek, `${query} with both dates`);
    const paged = await listStatements(ctx, `?${query}&cursor=em_seed${String(EMAILS - 1).padStart(15, '0')}`);
    assertSeeksFromCursor(planOf(ctx.file, paged.ran[0]), index, seek, `${query} after a cursor`);
  });
}

// A later page must start its read at the cursor. Without a bound on createdAt the plan still
// names the index, but walks it from the newest email to the cursor: about k pages of entries
// to reach page k, so paging through a project's history costs its square.
function assertSeeksFromCursor(plan: string[], index: string, seek: RegExp, label: string): void {
  assertSeeks(plan, index, seek, label);
  assert.match(plan[0], /createdAt<\?/, `the read starts at the cursor: ${label}: ${plan.join(' | ')}`);
}

test('a later page of the unfiltered list starts its read at the cursor', async (ctx) => {
  const { ran, body } = await listStatements(ctx, `?limit=2&cursor=em_seed${String(EMAILS - 10).padStart(15, '0')}`);
  assert.equal(body.emails.map((e) => e.id), [`em_seed${String(EMAILS - 11).padStart(15, '0')}`, `em_seed${String(EMAILS - 12).padStart(15, '0')}`]);
  assert.is(ran.length, 1, 'one read: a page filled before any email without createdAt is looked for');
  const plan = planOf(ctx.file, ran[0]);
  const shown = plan.join(' | ');
  assert.ok(plan[0].startsWith('SEARCH ') && plan[0].includes(` INDEX ${EMAILS_TABLE}__project_created `), shown);
  assert.match(plan[0], /\(field:projectId=\? AND field:createdAt<\?\)/, `the read starts at the cursor: ${shown}`);
  assert.not.ok(plan.some((step) => step.includes('TEMP B-TREE')), `the order comes from the index: ${shown}`);
});

test('filters that match answer as before: a page of the matches, newest first, then the next', async (ctx) => {
  const { w, real } = ctx;
  const newest = (await listStatements(ctx, '?limit=3')).body.emails.map((e) => e.id);
  assert.is(newest[0], real._id, 'the real email is the newest');
  for (const query of [`status=${real.status}`, `sender=${real.fromAddress}`, `domain=${real.fromDomain}`, `recipient=ann@${w.domain}`]) {
    const first = (await listStatements(ctx, `?${query}&limit=3`)).body;
    assert.equal(first.emails.map((e) => e.id), newest, query);
    const second = (await listStatements(ctx, `?${query}&limit=2&cursor=${newest[1]}`)).body;
    assert.equal(second.emails.map((e) => e.id), [`em_seed${String(EMAILS - 2).padStart(15, '0')}`, `em_seed${String(EMAILS - 3).padStart(15, '0')}`], `${query}, the next page`);
  }
  const one = (await listStatements(ctx, `?recipient=customer7@${w.domain}`)).body;
  assert.equal(one.emails.map((e) => e.id), [`em_seed${String(7).padStart(15, '0')}`], 'one recipient among several');
  for (const { query } of FILTERS) assert.equal((await listStatements(ctx, `?${query}`)).body.emails, [], `${query} matches nothing`);
});

test.run();

// A deployment made before: its filter indexes stop at createdAt and its recipient index is a
// plain one (over the JSON text of the array). The start replaces them under their names, and
// fills the recipient index from the emails already there.
const upgraded = suite<{ dir: string; t: TestApp }>('email list filters: the indexes of a deployment made before');

const BEFORE: IndexSpec[] = [
  { name: 'project_created', fields: [['projectId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
  { name: 'key_created', fields: [['projectId', 'asc'], ['apiKeyId', 'asc'], ['createdAt', 'desc'], ['_id', 'desc']] },
  { name: 'project_sender', fields: [['projectId', 'asc'], ['fromAddress', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_domain', fields: [['projectId', 'asc'], ['fromDomain', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_status', fields: [['projectId', 'asc'], ['status', 'asc'], ['createdAt', 'desc']] },
  { name: 'project_recipient', fields: [['projectId', 'asc'], ['toAddresses', 'asc'], ['createdAt', 'desc']] },
];

upgraded.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-list-upgrade-'));
  const old = new SqliteDocumentStore(join(ctx.dir, 'relay.db'));
  const emails = old.collection<{ _id: string; projectId: string; toAddresses: string[]; createdAt: string }>(COLLECTIONS.emails);
  await emails.ensureIndexes(BEFORE);
  await emails.insert({ _id: 'em_before', projectId: 'prj_before', toAddresses: ['ann@before.test', 'bob@before.test'], createdAt: '2025-01-01T00:00:00.000Z' });
  await old.close();
  ctx.t = await startTestApp({}, { dataDir: ctx.dir });
});

upgraded.after(async ({ t, dir }) => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

upgraded('the start redefines the filter indexes to end in the list\'s order, and the recipient index takes each address apart', async ({ t }) => {
  const file = new DatabaseSync(join(t.config.dataDir, 'relay.db'), { readOnly: true });
  try {
    const objects = new Map((file.prepare(`SELECT name, type, sql FROM sqlite_master WHERE tbl_name IN (?, ?)`).all(EMAILS_TABLE, `array:${EMAILS_TABLE}__project_recipient`) as Array<{ name: string; type: string; sql: string }>)
      .map((row) => [row.name, row]));
    for (const name of ['project_sender', 'project_domain', 'project_status']) {
      assert.match(objects.get(`${EMAILS_TABLE}__${name}`)?.sql ?? '', /"field:createdAt" DESC, id DESC\)$/, name);
    }
    assert.not.ok(objects.has(`${EMAILS_TABLE}__project_recipient`), 'the plain index under that name is gone');
    assert.is(objects.get(`array:${EMAILS_TABLE}__project_recipient`)?.type, 'table');
    assert.ok(objects.has(`array:${EMAILS_TABLE}__project_recipient/keys`));
  } finally {
    file.close();
  }
  const found = await t.ctx.documents.collection<EmailView>(COLLECTIONS.emails)
    .find({ where: { projectId: 'prj_before', toAddresses: { contains: 'bob@before.test' } }, orderBy: [['createdAt', 'desc'], ['_id', 'desc']] });
  assert.equal(found.map((e) => e._id), ['em_before'], 'an email from before is found by each of its addresses');
});

upgraded.run();
