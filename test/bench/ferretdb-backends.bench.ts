// FerretDB's backends side by side: the document store adapter (infra/mongodb/document-store.ts)
// running the queries Relay makes, against each server in BENCH_MONGODB_URLS, at growing
// collection sizes, one server after the other, on the same machine in the same run.
//
//   npm run bench -- ferretdb-backends
//   BENCH_MONGODB_URLS=sqlite=mongodb://127.0.0.1:27018,postgresql=mongodb://127.0.0.1:27019
//   BENCH_DOCS=1000,10000 BENCH_OPS=200 BENCH_PHASE_SECONDS=10 BENCH_PROJECTS=10
//
// Start the SQLite-backed FerretDB next to the usual PostgreSQL-backed one (`engines.sh up`) with
// `RELAY_FERRETDB_BACKEND=sqlite bash infra/engines/ferretdb.sh start` (infra/engines/README.md).
// A server that does not answer is reported and skipped.
//
// Per size, in a fresh database: load the collection (email read-model documents with the
// emails indexes; insertMany, as a rebuild writes), then time, one operation at a time (p50/p99)
// and with 8 at once (ops/s):
//   insert      one email document, unique _id (the projector's first event of an email)
//   get         by _id (detail read, the projector's read before a compare-and-set)
//   replace     compare-and-set on the version read (the projector's later events)
//   find eq     equality on an indexed field, limit 1 (lookups such as an API key by its hash)
//   list        {projectId} sorted by createdAt, _id descending, limit 11 (GET /v1/emails?limit=10)
//   count       {projectId, status} (dashboard counts)
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { EMAILS_PROJECTION } from '../../apps/services/projection-registry.ts';
import { MongoDocumentStore } from '../../infra/mongodb/document-store.ts';
import type { Collection } from '../../infra/ports/document-store.ts';

const URLS = (process.env.BENCH_MONGODB_URLS ?? 'sqlite=mongodb://127.0.0.1:27018,postgresql=mongodb://127.0.0.1:27019')
  .split(',').map((pair) => {
    const at = pair.indexOf('=');
    return { label: pair.slice(0, at), url: pair.slice(at + 1) };
  });
const SIZES = (process.env.BENCH_DOCS ?? '1000,10000').split(',').map(Number);
const OPS = Number(process.env.BENCH_OPS ?? 200);
const PROJECTS = Number(process.env.BENCH_PROJECTS ?? 10);
const CONCURRENCY = 8;
const PHASE_SECONDS = Number(process.env.BENCH_PHASE_SECONDS ?? 10);

interface Doc {
  _id: string;
  projectId: string;
  workspaceId: string;
  apiKeyId: string;
  fromAddress: string;
  fromDomain: string;
  toAddresses: string[];
  to: string[];
  cc: string[];
  replyTo: null;
  subject: string;
  status: string;
  testMode: boolean;
  failureCode: null;
  createdAt: string;
  sentAt: null;
  deliveredAt: null;
  providerMessageId: null;
  recipients: Array<{ address: string; status: string; occurredAt: string }>;
  webhookDeliveries: never[];
  metadata: Record<string, unknown>;
  tags: Record<string, string>;
  events: Array<{ id: string; type: string; occurredAt: string; payload: Record<string, unknown> }>;
  streamRevision: number;
}

const STATUSES = ['queued', 'sent', 'delivered', 'bounced'];

function emailDoc(i: number, prefix = 'em_'): Doc {
  const at = new Date(Date.UTC(2026, 10, 1) + i * 1000).toISOString();
  const address = `user${i}@example.test`;
  return {
    _id: `${prefix}${i.toString(36).padStart(8, '0')}`,
    projectId: `prj_${i % PROJECTS}`, workspaceId: `ws_${i % PROJECTS}`, apiKeyId: `key_${i % (PROJECTS * 2)}`,
    fromAddress: 'noreply@acme.test', fromDomain: 'acme.test', toAddresses: [address], to: [`User ${i} <${address}>`], cc: [],
    replyTo: null, subject: `Your order ${i} has shipped`, status: STATUSES[i % STATUSES.length], testMode: false, failureCode: null,
    createdAt: at, sentAt: null, deliveredAt: null, providerMessageId: null,
    recipients: [{ address, status: 'queued', occurredAt: at }], webhookDeliveries: [],
    metadata: { orderId: i }, tags: { kind: 'shipping' },
    events: [{ id: randomBytes(16).toString('hex'), type: 'email.queued', occurredAt: at, payload: { recipients: 1 } }],
    streamRevision: 0,
  };
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];

interface Row { backend: string; docs: number; op: string; p50: number; p99: number; perSecond: number; ops?: number }

/**
 * p50/p99 one at a time, and ops/s with CONCURRENCY at once: each phase runs OPS operations,
 * or fewer when it passes BENCH_PHASE_SECONDS (at least 5), so that scans of large collections
 * on a slow backend still end.
 */
async function measure(op: (i: number) => Promise<unknown>): Promise<{ p50: number; p99: number; perSecond: number; ops: number }> {
  const times: number[] = [];
  let deadline = performance.now() + PHASE_SECONDS * 1000;
  for (let i = 0; i < OPS && (i < 5 || performance.now() < deadline); i++) {
    const started = performance.now();
    await op(i);
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  let next = 0;
  let done = 0;
  const started = performance.now();
  deadline = started + PHASE_SECONDS * 1000;
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (next < OPS && (next < 5 || performance.now() < deadline)) {
      await op(OPS + next++);
      done++;
    }
  }));
  return { p50: percentile(times, 50), p99: percentile(times, 99), perSecond: done / ((performance.now() - started) / 1000), ops: times.length };
}

async function benchServer(label: string, baseUrl: string, rows: Row[]): Promise<void> {
  for (const size of SIZES) {
    const url = new URL(baseUrl);
    url.pathname = `/bench_backends_${randomBytes(4).toString('hex')}`;
    const store = await MongoDocumentStore.connect(url.toString());
    try {
      await EMAILS_PROJECTION.ensureIndexes(store, 'emails');
      const emails = store.collection<Doc>('emails');
      const loadStarted = performance.now();
      for (let i = 0; i < size; i += 1000) await emails.insertMany!(Array.from({ length: Math.min(1000, size - i) }, (_, j) => emailDoc(i + j)));
      const loadSeconds = (performance.now() - loadStarted) / 1000;
      rows.push({ backend: label, docs: size, op: 'load (insertMany)', p50: NaN, p99: NaN, perSecond: size / loadSeconds, ops: size });
      const add = (op: string, result: { p50: number; p99: number; perSecond: number; ops: number }) => rows.push({ backend: label, docs: size, op, ...result });
      const existing = (i: number) => emailDoc((i * 7919) % size)._id;
      add('insert', await measure((i) => emails.insert(emailDoc(size + i, 'em_new_'))));
      add('get', await measure((i) => emails.get(existing(i))));
      add('replace (CAS)', await measure(async (i) => {
        const current = await emails.get(existing(i));
        if (current) await emails.replace({ ...current, status: 'sent', streamRevision: current.streamRevision + 1 }, current._v);
      }));
      add('find eq', await measure((i) => emails.find({ where: { apiKeyId: `key_${i % (PROJECTS * 2)}` }, limit: 1 })));
      add('list', await measure((i) => listPage(emails, `prj_${i % PROJECTS}`)));
      add('count', await measure((i) => emails.count({ projectId: `prj_${i % PROJECTS}`, status: 'sent' })));
    } finally {
      await store.drop('emails').catch(() => {});
      await store.close();
    }
    console.log(`  ${label}: ${size} documents done`);
  }
}

const listPage = (emails: Collection<Doc>, projectId: string) =>
  emails.find({ where: { projectId }, orderBy: [['createdAt', 'desc'], ['_id', 'desc']], limit: 11 });

async function main(): Promise<void> {
  const rows: Row[] = [];
  for (const { label, url } of URLS) {
    try {
      const probe = await MongoDocumentStore.connect(url);
      await probe.close();
    } catch (error) {
      console.log(`${label} (${url}): not answering, skipped (${(error as Error).message})`);
      continue;
    }
    await benchServer(label, url, rows);
  }
  const cpu = cpus();
  console.log(`\nferretdb backends: node ${process.version}, ${cpu.length} × ${cpu[0]?.model.trim()}; up to ${OPS} ops or ${PHASE_SECONDS} s one at a time (p50/p99, n = ops), then with ${CONCURRENCY} at once (ops/s); ${PROJECTS} projects`);
  console.log(`${'backend'.padEnd(11)} ${'docs'.padStart(7)}  ${'operation'.padEnd(18)} ${'p50 ms'.padStart(9)} ${'p99 ms'.padStart(9)} ${'ops/s'.padStart(9)} ${'n'.padStart(6)}`);
  const fmt = (n: number) => (Number.isNaN(n) ? '' : n.toFixed(2)).padStart(9);
  for (const r of rows) console.log(`${r.backend.padEnd(11)} ${String(r.docs).padStart(7)}  ${r.op.padEnd(18)} ${fmt(r.p50)} ${fmt(r.p99)} ${r.perSecond.toFixed(0).padStart(9)} ${String(r.ops ?? '').padStart(6)}`);
}

await main();
