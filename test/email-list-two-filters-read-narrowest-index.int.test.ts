// GET /v1/emails (and the dashboard's GET /v1/projects/{id}/emails, whose filter form offers status,
// sender, sender domain and recipient together, and which re-reads its first page every few seconds
// while open) with two filters reads by the index of the filter that narrows most, so a page reads
// about a page of emails whatever the combination. SQLite has no statistics here (no ANALYZE) and
// would take the first of the equally good-looking filter indexes (apps/services/email-reads.ts
// EMAIL_VIEW_INDEXES) by the schema's order, walking every email that filter matches and testing the
// other; so the embedded store (infra/sqlite/document-query.ts, indexProbes) probes each candidate
// index with a bounded count of the entries its equalities select and reads by the one that selects
// fewest (INDEXED BY, or through the recipient side table leading the join).
//
// Why it matters: node:sqlite is synchronous, so such a walk holds the event loop of the whole process
// (every tenant's admissions, deliveries, /healthz) for its duration and grows with the project's
// history; any member (viewer included) or email:read key can ask for it, and the dashboard polls it.
//
// The plan SQLite makes for the very statement a list read runs (captured as it runs, then explained
// on the same file) says which index leads whatever the machine: here, with one filter matching every
// email of the project and the other none, the index of the one that matches none.
import { DatabaseSync } from 'node:sqlite';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { deferDurability } from '../infra/ports/durability.ts';
import type { EmailView } from '../projections/email-view.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { listStatementsOf, planOf, type RanStatement } from './support/query-plans.ts';
import { waitUntil } from './support/eventually.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, sendEmail, type TemplateWorld } from './support/templates.ts';

/** The project's history: one sender, one domain, one status, every email to ops@ (and one customer). */
const EMAILS = 20_000;
const EMAILS_TABLE = 'doc_emails';

interface Ctx { t: TestApp; w: TemplateWorld; real: EmailView; file: DatabaseSync }

const test = suite<Ctx>('email list: two filters');

const seedId = (i: number) => `em_seed${String(i).padStart(15, '0')}`;

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { processors: ['projector'] });
  ctx.w = await populateTemplateWorld(ctx.t);
  const sent = await sendEmail(ctx.t, ctx.w.apiKey, { from: `app@${ctx.w.domain}`, to: `ops@${ctx.w.domain}`, subject: 'Receipt', text: 'x' });
  assert.is(sent.statusCode, 202, sent.body);
  const emails = ctx.t.ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  let view: EmailView | null = null;
  await waitUntil(async () => (view = await emails.get(sent.json().id)) !== null, 'projected');
  const { _v, ...real } = view! as EmailView & { _v: number };
  void _v;
  ctx.real = real;
  // The project's history as the projector writes it (copies of the real view), oldest first.
  const start = Date.parse(real.createdAt) - EMAILS * 1000;
  for (let from = 0; from < EMAILS; from += 5_000) {
    await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, EMAILS - from) }, (_, j) => {
      const i = from + j;
      return emails.insert({
        ...real,
        _id: seedId(i),
        createdAt: new Date(start + i * 1000).toISOString(),
        toAddresses: [`customer${i}@${ctx.w.domain}`, `ops@${ctx.w.domain}`],
      });
    })));
  }
  ctx.file = new DatabaseSync(join(ctx.t.config.dataDir, 'relay.db'), { readOnly: true });
});

test.after(async ({ t, file }) => {
  file?.close();
  await t?.close();
});

/** A list read with the project's email:read key, the statements over the emails table it ran, and how long it took. */
async function list(ctx: Ctx, query: string): Promise<{ ran: RanStatement[]; ids: string[]; ms: number }> {
  const { result, ran } = await listStatementsOf(EMAILS_TABLE, async () => {
    const began = performance.now();
    const response = await ctx.t.app.inject({ method: 'GET', url: `/v1/emails${query}`, headers: { authorization: `Bearer ${ctx.w.apiKey}` } });
    const ms = performance.now() - began;
    assert.is(response.statusCode, 200, response.body);
    return { ids: (response.json() as { emails: Array<{ id: string }> }).emails.map((e) => e.id), ms };
  });
  return { ran, ...result };
}


const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** Two filters: one that matches every email of the project, one that matches none of them. */
const PAIRS: Array<{ name: string; all: (ctx: Ctx) => string; none: (ctx: Ctx) => string; seek: RegExp }> = [
  { name: 'status and sender', all: ({ real }) => `status=${real.status}`, none: ({ w }) => `sender=alerts@${w.domain}`, seek: /fromAddress=\?/ },
  { name: 'status and domain', all: ({ real }) => `status=${real.status}`, none: () => 'domain=other.test', seek: /fromDomain=\?/ },
  { name: 'domain and sender', all: ({ real }) => `domain=${real.fromDomain}`, none: ({ w }) => `sender=alerts@${w.domain}`, seek: /fromAddress=\?/ },
  { name: 'recipient and status', all: ({ w }) => `recipient=ops@${w.domain}`, none: () => 'status=complained', seek: /status=\?/ },
  // The other way round, the recipient's side table leads.
  { name: 'status and recipient', all: ({ real }) => `status=${real.status}`, none: ({ w }) => `recipient=nobody@${w.domain}`, seek: /each:toAddresses=\?/ },
];

for (const { name, all, none, seek } of PAIRS) {
  test(`?${name}: a page of nothing is read from the filter that matches nothing`, async (ctx) => {
    // The positive markers: either filter alone answers at once, one with a full page, the other with none.
    assert.is((await list(ctx, `?${all(ctx)}`)).ids.length, 50, `${all(ctx)} alone: a full page`);
    assert.equal((await list(ctx, `?${none(ctx)}`)).ids, [], `${none(ctx)} alone: nothing`);
    const both = await list(ctx, `?${all(ctx)}&${none(ctx)}`);
    assert.equal(both.ids, [], 'together: nothing');
    assert.is(both.ran.length, 1, `one read of the list: ${both.ran.map((r) => r.sql).join('\n')}`);
    const plan = planOf(ctx.file, both.ran[0]);
    const times = { alone: [] as number[], both: [] as number[] };
    for (let i = 0; i < 5; i++) {
      times.alone.push((await list(ctx, `?${none(ctx)}`)).ms);
      times.both.push((await list(ctx, `?${all(ctx)}&${none(ctx)}`)).ms);
    }
    const shown = `${plan.join(' | ')} (median read over ${EMAILS.toLocaleString('en')} emails: both filters ${median(times.both).toFixed(1)} ms, ` +
      `${none(ctx)} alone ${median(times.alone).toFixed(1)} ms)`;
    assert.ok(plan[0].startsWith('SEARCH '), `the read seeks: ${shown}`);
    assert.match(plan[0], seek, `the first step seeks by ${none(ctx).split('=')[0]}, not through every email ${all(ctx)} matches: ${shown}`);
  });
}

test.run();
