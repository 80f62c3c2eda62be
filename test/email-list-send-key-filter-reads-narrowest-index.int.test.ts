// GET /v1/emails for a key with only email:send (the contract: "an email:send key reads emails it
// created") with a filter (status, sender, domain or recipient) reads by the narrowest of the indexes
// its where clause can seek: the key's (key_created: project, key) or the filter's (project, filter;
// apps/services/email-reads.ts EMAIL_VIEW_INDEXES). No index carries both, and none is added (each
// makes every update of an email view costlier); SQLite without statistics would take the filter's
// index by the schema's order and test the key on every email of the project that the filter
// matches, so the embedded store (infra/sqlite/document-query.ts, indexProbes) probes each candidate
// with a bounded count of the entries its equalities select and reads by the one that selects fewest.
//
// Why it matters: node:sqlite is synchronous, so walking the project's history for a key's page holds
// the event loop of the whole process (every tenant's admissions, deliveries, /healthz) for a time
// that grows with the project, not with the key's page. The common case would be the worst: a
// service's own send key listing its emails with ?status=delivered in a project where other keys sent
// most of the mail.
//
// Here the key's own emails are a few among the project's; every one matches the filter, so the
// key's index is the narrowest: the plan of the very statement a list read runs (captured as it runs,
// then explained on the same file) seeks it, and the pages (later ones too) hold the key's emails.
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
import { call } from './support/management.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, sendEmail, type TemplateWorld } from './support/templates.ts';

/** The project's history (sent by the project's main key), and the send-only key's own emails among it. */
const EMAILS = 20_000;
const KEY_EMAILS = 20;
const EMAILS_TABLE = 'doc_emails';

interface Ctx { t: TestApp; w: TemplateWorld; real: EmailView; sendKey: string; keyEmails: string[]; file: DatabaseSync }

const test = suite<Ctx>('email list: a send-only key\'s filtered page');

const seedId = (i: number) => `em_seed${String(i).padStart(15, '0')}`;

test.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { processors: ['projector'] });
  ctx.w = await populateTemplateWorld(ctx.t);
  const made = await call(ctx.t, 'POST', `/v1/projects/${ctx.w.projectId}/api-keys`, { as: ctx.w.owner, body: { name: 'billing service', permissions: ['email:send'] } });
  assert.is(made.statusCode, 201, made.body);
  ctx.sendKey = made.json().secret;
  const sendKeyId = made.json().id as string;
  const sent = await sendEmail(ctx.t, ctx.w.apiKey, { from: `app@${ctx.w.domain}`, to: `ops@${ctx.w.domain}`, subject: 'Receipt', text: 'x' });
  assert.is(sent.statusCode, 202, sent.body);
  const emails = ctx.t.ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  let view: EmailView | null = null;
  await waitUntil(async () => (view = await emails.get(sent.json().id)) !== null, 'projected');
  const { _v, ...real } = view! as EmailView & { _v: number };
  void _v;
  ctx.real = real;
  // The project's history as the projector writes it (copies of the real view), oldest first; one
  // email in every EMAILS / KEY_EMAILS is the send-only key's, the rest the main key's.
  const start = Date.parse(real.createdAt) - EMAILS * 1000;
  const every = EMAILS / KEY_EMAILS;
  ctx.keyEmails = [];
  for (let from = 0; from < EMAILS; from += 5_000) {
    await deferDurability(() => Promise.all(Array.from({ length: Math.min(5_000, EMAILS - from) }, (_, j) => {
      const i = from + j;
      const mine = i % every === 0;
      if (mine) ctx.keyEmails.unshift(seedId(i));
      return emails.insert({
        ...real,
        _id: seedId(i),
        apiKeyId: mine ? sendKeyId : real.apiKeyId,
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

/** A list read with the send-only key, the statements over the emails table it ran, and how long it took. */
async function listAsSendKey(ctx: Ctx, query: string): Promise<{ ran: RanStatement[]; ids: string[]; ms: number }> {
  const { result, ran } = await listStatementsOf(EMAILS_TABLE, async () => {
    const began = performance.now();
    const response = await ctx.t.app.inject({ method: 'GET', url: `/v1/emails${query}`, headers: { authorization: `Bearer ${ctx.sendKey}` } });
    const ms = performance.now() - began;
    assert.is(response.statusCode, 200, response.body);
    return { ids: (response.json() as { emails: Array<{ id: string }> }).emails.map((e) => e.id), ms };
  });
  return { ran, ...result };
}


const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const FILTERS: Array<{ name: string; query: (ctx: Ctx) => string }> = [
  { name: 'status', query: ({ real }) => `status=${real.status}` },
  { name: 'sender', query: ({ real }) => `sender=${encodeURIComponent(real.fromAddress)}` },
  { name: 'domain', query: ({ real }) => `domain=${real.fromDomain}` },
  // Every email of the project is to ops@: the recipient matches the whole history, as status does.
  { name: 'recipient', query: ({ w }) => `recipient=ops@${w.domain}` },
];

for (const { name, query } of FILTERS) {
  test(`a send-only key's ?${name}= page reads by the key's index, the narrowest, not the project's ${name} history`, async (ctx) => {
    const unfiltered = await listAsSendKey(ctx, '');
    assert.equal(unfiltered.ids, ctx.keyEmails, 'the key sees its own emails, newest first');
    // The positive marker: the filtered page is the key's own emails (every one matches).
    const filtered = await listAsSendKey(ctx, `?${query(ctx)}`);
    assert.equal(filtered.ids, ctx.keyEmails, `?${name}: the key's own emails`);
    assert.is(filtered.ran.length, 1, `one read of the list: ${filtered.ran.map((r) => r.sql).join('\n')}`);
    const plan = planOf(ctx.file, filtered.ran[0]);
    const times = { unfiltered: [] as number[], filtered: [] as number[] };
    for (let i = 0; i < 5; i++) {
      times.unfiltered.push((await listAsSendKey(ctx, '')).ms);
      times.filtered.push((await listAsSendKey(ctx, `?${query(ctx)}`)).ms);
    }
    const shown = `${plan.join(' | ')} (median read over ${EMAILS.toLocaleString('en')} emails: filtered ${median(times.filtered).toFixed(1)} ms, ` +
      `unfiltered ${median(times.unfiltered).toFixed(1)} ms)`;
    assert.ok(plan[0].startsWith('SEARCH '), `the read seeks: ${shown}`);
    assert.ok(plan[0].includes(` INDEX ${EMAILS_TABLE}__key_created `), `the key's index leads: ${shown}`);
    assert.match(plan[0], /apiKeyId=\?/, `the first step seeks by the key, not the project's whole ${name} history: ${shown}`);
    assert.not.ok(plan.some((step) => step.includes('TEMP B-TREE')), `the order comes from the index: ${shown}`);
  });

  test(`a send-only key's ?${name}= pages, read by the key's index, hold the key's emails in order`, async (ctx) => {
    const pages: string[] = [];
    let cursor: string | undefined;
    for (let i = 0; i < KEY_EMAILS; i++) {
      const page = await listAsSendKey(ctx, `?${query(ctx)}&limit=7${cursor === undefined ? '' : `&cursor=${cursor}`}`);
      assert.ok(page.ran.length >= 1, 'the page read the list');
      assert.ok(planOf(ctx.file, page.ran[0])[0].includes(` INDEX ${EMAILS_TABLE}__key_created `), `page ${i + 1} reads by the key's index`);
      pages.push(...page.ids);
      if (page.ids.length < 7) break;
      cursor = page.ids[page.ids.length - 1];
    }
    assert.equal(pages, ctx.keyEmails, 'every page in turn: the key\'s emails, newest first, each once');
  });
}

test.run();
