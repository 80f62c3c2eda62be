// `relay projections run` drives the example projection (examples/projections/
// complaints-per-template.mjs) over a generated history: first as it follows the event store
// live (events appended while it runs reach it), then, stopped, more events are appended and a
// second run resumes from its checkpoint, applying exactly those. Its results equal counts made
// here from the events. Also `relay events export` and the `relay events` fixes on the same data.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { appendHistory, generateHistory, type EmailPlan } from './support/history.ts';
import { runRelay, spawnRelay } from './support/relay-process.ts';

const test = suite('custom projections and event export (relay projections run, relay events export)');
const dataDir = mkdtempSync(join(tmpdir(), 'relay-custom-projection-'));
const out = join(dataDir, 'complaints.json');
const env = { RELAY_DATA_DIR: dataDir, COMPLAINTS_OUT: out };
let stores: Stores;
const plans: EmailPlan[] = [];

/** Complaints per template revision, counted from the plans. */
function expectedComplaints(): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const plan of plans) {
    const accepted = plan.events.find((e) => e.type === 'EmailAccepted')?.data as { template: { slug: string; revision: number } | null } | undefined;
    if (!accepted) continue;
    const key = accepted.template ? `${accepted.template.slug}@${accepted.template.revision}` : '(no template)';
    for (const e of plan.events) if (e.type === 'RecipientReported' && (e.data as { outcome: string }).outcome === 'complained') counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

const results = (): Record<string, number> | null => (existsSync(out) ? JSON.parse(readFileSync(out, 'utf8')).complaints : null);

async function addHistory(part: number, emails: number): Promise<number> {
  const more = generateHistory({ emails, projectId: 'prj_custom', seed: 100 + part, idPrefix: `em_part${part}_` });
  plans.push(...more);
  return appendHistory(stores.events, more);
}

test.before(async () => {
  stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
});

test.after(async () => {
  await stores.close();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a projection of one\'s own follows live, stops, and resumes from its checkpoint', async () => {
  await addHistory(1, 400);
  const running = spawnRelay(['projections', 'run', 'examples/projections/complaints-per-template.mjs', '--follow'], env);
  await waitUntil(() => JSON.stringify(results()) === JSON.stringify(expectedComplaints()), 'the first part is counted', 60_000);
  // Live: appended while it follows.
  await addHistory(2, 300);
  await waitUntil(() => JSON.stringify(results()) === JSON.stringify(expectedComplaints()), 'the second part is counted live', 60_000);
  const stopped = await running.stop();
  assert.is(stopped.code, 0, running.output());
  // Appended while it is stopped; the next run starts after its checkpoint.
  const third = await addHistory(3, 200);
  const resumed = await runRelay(['projections', 'run', 'examples/projections/complaints-per-template.mjs'], env);
  assert.is(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stderr, new RegExp(`complaints-per-template: ${third} events applied after \\d+;`), 'exactly the events appended since the checkpoint');
  assert.equal(results(), expectedComplaints());
  assert.ok(Object.values(expectedComplaints()).reduce((a, b) => a + b, 0) > 10, 'the history has complaints');
  // Nothing new: nothing applied.
  const again = await runRelay(['projections', 'run', 'examples/projections/complaints-per-template.mjs'], env);
  assert.match(again.stderr, /: 0 events applied after/);
});

test('relay events export: JSON lines or CSV, a project, time and position bounds, redacted, progress on stderr', async () => {
  const all = await stores.events.readAll({ maxCount: 100_000 });
  const jsonl = await runRelay(['events', 'export', '--format', 'jsonl'], env);
  assert.is(jsonl.code, 0, jsonl.stderr);
  const lines = jsonl.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.is(lines.length, all.length);
  assert.match(jsonl.stderr, new RegExp(`exported ${all.length} events`));
  const middle = all[Math.floor(all.length / 2)];
  const tail = await runRelay(['events', 'export', '--from', middle.position], env);
  assert.is(tail.stdout.trim().split('\n').length, all.length - Math.floor(all.length / 2) - 1, '--from a position is exclusive');
  const head = await runRelay(['events', 'export', '--to', middle.position, '--format', 'csv'], env);
  const rows = head.stdout.trim().split('\n');
  assert.is(rows[0], 'position,recordedAt,streamId,revision,id,type,schemaVersion,correlationId,causationId,occurredAt,data');
  assert.is(rows.length - 1, Math.floor(all.length / 2) + 1, '--to a position is inclusive');
  const future = await runRelay(['events', 'export', '--from', '2100-01-01T00:00:00Z'], env);
  assert.is(future.stdout, '', 'nothing recorded after a future time');
  // The history was appended straight to the stores: no key file. --redact takes the key from RELAY_SECRET_KEY.
  const redacted = await runRelay(['events', 'export', '--redact', '--project', 'prj_custom'], { ...env, RELAY_SECRET_KEY: randomBytes(32).toString('base64') });
  assert.is(redacted.code, 0, redacted.stderr);
  const exported = redacted.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.ok(exported.length > 0 && exported.every((e) => e.streamId.startsWith('email-')));
  const accepted = exported.find((e) => e.type === 'EmailAccepted');
  assert.is(accepted.data.content, null, 'no sealed content');
  assert.match(accepted.data.toAddresses[0], /^[0-9a-f]{20}@/, 'addresses replaced by their keyed token, domain kept');
  assert.not.match(redacted.stdout, /"u\d+\.\d+@/, 'no recipient address anywhere');
  const none = await runRelay(['events', 'export', '--project', 'prj_other'], env);
  assert.is(none.stdout, '');
});

test('relay events: an exact --type, --since/--until, --upcast, and no event store created where there is none', async () => {
  const exact = await runRelay(['events', '--type', 'DeliveryClaimed', '--limit', '3'], env);
  const claimed = exact.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.is(claimed.length, 3);
  assert.ok(claimed.every((e) => e.type === 'DeliveryClaimed'));
  const prefixOnly = await runRelay(['events', '--type', 'Delivery', '--limit', '3'], env);
  assert.is(prefixOnly.stdout, '', 'a prefix is no type');
  assert.match(prefixOnly.stderr, /no event type of this version/);
  const all = await stores.events.readAll({ maxCount: 100_000 });
  const since = await runRelay(['events', '--since', '2100-01-01', '--limit', '5'], env);
  assert.is(since.stdout, '');
  const until = await runRelay(['events', '--until', all[0].recordedAt.slice(0, 10)], env);
  assert.is(until.stdout, '', 'nothing before the day the first event was recorded');
  const upcast = await runRelay(['events', '--upcast', '--limit', '1'], env);
  assert.is(JSON.parse(upcast.stdout).type, all[0].type);
  const empty = mkdtempSync(join(tmpdir(), 'relay-no-store-'));
  try {
    const refused = await runRelay(['events', '--limit', '1'], { RELAY_DATA_DIR: empty });
    assert.is(refused.code, 1);
    assert.match(refused.stderr, /no event store in/);
    assert.not.ok(existsSync(join(empty, 'relay.db')), 'no store was created');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test.run();
