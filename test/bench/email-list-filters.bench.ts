// What a page of GET /v1/emails costs on the embedded store with and without a filter, over a
// project's long history: each filter (status, sender, domain, recipient) matching nothing,
// matching one email, and matching every email, within two dates, and on a later and a deep page, against
// the unfiltered first page. node:sqlite is synchronous, so a read's time is time the event
// loop is held for every tenant; a filtered page should cost about what an unfiltered one
// does, not a walk of the project (apps/services/email-reads.ts, EMAIL_VIEW_INDEXES; which
// index each read seeks is asserted by test/email-list-filter-plans.int.test.ts).
//
//   node test/bench/email-list-filters.bench.ts        (or: npm run bench -- email-list-filters)
//   BENCH_EMAILS=20000   emails in the project (copies of one projected email, as the projector writes it)
//   BENCH_READS=30       reads of each query; the median is printed
//
// Each read goes through the real API (fastify's inject, bearer key, schema, read model).
import { COLLECTIONS } from '../../apps/services/collections.ts';
import type { EmailView } from '../../projections/email-view.ts';
import { startTestApp } from '../support/app.ts';
import { waitUntil } from '../support/eventually.ts';
import { DASHBOARD_ORIGIN, populateTemplateWorld, sendEmail } from '../support/templates.ts';

const EMAILS = Number(process.env.BENCH_EMAILS ?? 20_000);
const READS = Number(process.env.BENCH_READS ?? 30);

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

const t = await startTestApp({ RELAY_DASHBOARD_ORIGIN: DASHBOARD_ORIGIN }, { processors: ['projector'] });
try {
  const w = await populateTemplateWorld(t);
  const sent = await sendEmail(t, w.apiKey, {
    from: `app@${w.domain}`, to: `ann@${w.domain}`, subject: 'Receipt', text: 'x',
    metadata: { order: 'A-1', lines: Array.from({ length: 40 }, (_, i) => ({ sku: `sku-${i}`, title: 'a product title of some length' })) },
  });
  if (sent.statusCode !== 202) throw new Error(`send refused: ${sent.body}`);
  const emails = t.ctx.documents.collection<EmailView>(COLLECTIONS.emails);
  let view: EmailView | null = null;
  await waitUntil(async () => (view = await emails.get(sent.json().id)) !== null, 'projected');
  const { _v, ...real } = view! as EmailView & { _v: number };
  void _v;
  const start = Date.parse(real.createdAt) - EMAILS * 1000;
  const seedId = (i: number) => `em_seed${String(i).padStart(15, '0')}`;
  const seeding = performance.now();
  for (let i = 0; i < EMAILS; i += 500) {
    await Promise.all(Array.from({ length: Math.min(500, EMAILS - i) }, (_, j) => emails.insert({
      ...real,
      _id: seedId(i + j),
      createdAt: new Date(start + (i + j) * 1000).toISOString(),
      toAddresses: [`customer${i + j}@${w.domain}`],
    })));
  }
  const seededMs = performance.now() - seeding;

  async function timed(query: string): Promise<{ ms: number; found: number }> {
    const times: number[] = [];
    let found = 0;
    for (let i = 0; i < READS; i++) {
      const began = performance.now();
      const response = await t.app.inject({ method: 'GET', url: `/v1/emails${query}`, headers: { authorization: `Bearer ${w.apiKey}` } });
      times.push(performance.now() - began);
      if (response.statusCode !== 200) throw new Error(`${query}: ${response.statusCode} ${response.body}`);
      found = (response.json() as { emails: unknown[] }).emails.length;
    }
    return { ms: median(times), found };
  }

  const window = `after=${new Date(start).toISOString()}&before=${new Date(Date.parse(real.createdAt) + 1000).toISOString()}`;
  const cursor = `cursor=${seedId(EMAILS - 100)}`;
  // Near the oldest email: a read that walks the index from the newest to its cursor shows here.
  const deepCursor = `cursor=${seedId(100)}`;
  const baseline = await timed('');
  const rows: Array<[string, string]> = [
    ['status: none', '?status=complained'],
    ['status: all', `?status=${real.status}`],
    ['status: none, two dates', `?status=complained&${window}`],
    ['sender: none', '?sender=nobody@acme.test'],
    ['sender: all', `?sender=${real.fromAddress}`],
    ['domain: none', '?domain=other.test'],
    ['domain: all, later page', `?domain=${real.fromDomain}&${cursor}`],
    ['unfiltered, deep page', `?${deepCursor}`],
    ['status: all, deep page', `?status=${real.status}&${deepCursor}`],
    ['recipient: none, deep page', `?recipient=nobody@acme.test&${deepCursor}`],
    ['recipient: none', '?recipient=nobody@acme.test'],
    ['recipient: one', `?recipient=customer${Math.floor(EMAILS / 2)}@${w.domain}`],
    ['recipient: none, two dates', `?recipient=nobody@acme.test&${window}`],
  ];
  console.log(`email list filters: node ${process.version}; ${EMAILS.toLocaleString('en')} emails in one project (seeded in ${Math.round(seededMs)} ms); median of ${READS} reads each`);
  console.log(`  ${'unfiltered first page'.padEnd(28)} ${baseline.ms.toFixed(2).padStart(8)} ms  (${baseline.found} emails)`);
  for (const [label, query] of rows) {
    const { ms, found } = await timed(query);
    console.log(`  ${label.padEnd(28)} ${ms.toFixed(2).padStart(8)} ms  (${found} emails)  ${(ms / baseline.ms).toFixed(2)}× unfiltered`);
  }
} finally {
  await t.close();
}
