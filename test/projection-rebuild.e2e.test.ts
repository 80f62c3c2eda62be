// Replay for analysts and ops: `relay projections rebuild emails` rebuilds the read model
// from the event store; the rebuilt model equals the live one, and the service keeps
// answering reads while it runs and after the swap.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../infra/config.ts';
import { openStores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

const test = suite('projection rebuild (embedded, real processes)');

const dataDir = mkdtempSync(join(tmpdir(), 'relay-rebuild-'));
const env = { RELAY_DATA_DIR: dataDir };
let relay: RelayProcess;
let baseUrl = '';
let apiKey = '';
const sentIds: string[] = [];

const headers = () => ({ authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' });

async function send(i: number): Promise<string> {
  const body = { from: 'app@example.test', to: [`user${i}@example.test`], cc: i % 3 === 0 ? 'cc@example.test' : undefined, subject: `Message ${i}`, text: 'hello', tags: { n: String(i) } };
  return (await postEmail(baseUrl, apiKey, body)).id;
}

async function listedCount(): Promise<number> {
  let count = 0;
  let cursor: string | null = null;
  do {
    const page = (await (await fetch(`${baseUrl}/v1/emails?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: headers() })).json()) as { emails: unknown[]; next_cursor: string | null };
    count += page.emails.length;
    cursor = page.next_cursor;
  } while (cursor);
  return count;
}

/** The collection's documents without the store's version field, by id. */
async function snapshot(collection: string): Promise<Map<string, unknown>> {
  const stores = await openStores(loadConfig(env));
  try {
    const docs = await stores.documents.collection<{ _id: string }>(collection).find({ orderBy: [['_id', 'asc']], limit: 100_000 });
    return new Map(docs.map(({ _v, ...doc }) => [doc._id, doc]));
  } finally {
    await stores.close();
  }
}

test.before(async () => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--workspace', 'Ops', '--project', 'app', '--domain', 'example.test', '--environment', 'production', '--activate'], env);
  assert.is(setup.code, 0, setup.stderr);
  apiKey = JSON.parse(setup.stdout).apiKey;
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  relay = spawnRelay(['start'], { ...env, PORT: String(port) });
  await waitForReady(baseUrl, relay);
  for (let i = 0; i < 60; i++) sentIds.push(await send(i));
  await waitUntil(async () => (await listedCount()) === sentIds.length, 'every email is in the live read model');
});

test.after(async () => {
  await relay?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

test('a model rebuilt from the event store into a fresh collection equals the live one', async () => {
  const run = await runRelay(['projections', 'rebuild', 'emails', '--into', 'emails_check', '--json'], env);
  assert.is(run.code, 0, run.stderr);
  const result = JSON.parse(run.stdout);
  assert.is(result.documents, sentIds.length);
  assert.ok(result.events >= sentIds.length);
  assert.match(run.stderr, /100%/, 'progress reaches 100%');
  const live = await snapshot(COLLECTIONS.emails);
  const rebuilt = await snapshot('emails_check');
  assert.is(rebuilt.size, live.size);
  for (const [id, doc] of live) assert.equal(rebuilt.get(id), doc, `email ${id} is identical`);
});

test('rebuild with swap: reads keep answering during it, and every email is there after it', async () => {
  let reading = true;
  let failedReads = 0;
  let reads = 0;
  const reader = (async () => {
    while (reading) {
      const response = await fetch(`${baseUrl}/v1/emails/${sentIds[reads % sentIds.length]}`, { headers: headers() });
      reads++;
      if (response.status !== 200) failedReads++;
    }
  })();
  const run = await runRelay(['projections', 'rebuild', 'emails'], env);
  // Sends during and after the swap must land in the new model too.
  sentIds.push(await send(1000));
  reading = false;
  await reader;
  assert.is(run.code, 0, run.stderr);
  assert.match(run.stdout, /swapped in/);
  assert.ok(reads > 0);
  assert.is(failedReads, 0, 'no read failed while the rebuild ran');
  await waitUntil(async () => (await listedCount()) === sentIds.length, 'the swapped-in model lists every email, including one sent after the swap');
});

test('relay events exports the global order and one stream as JSON lines', async () => {
  const all = await runRelay(['events', '--prefix', 'email-', '--limit', '5'], env);
  assert.is(all.code, 0, all.stderr);
  const lines = all.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.is(lines.length, 5);
  assert.ok(lines.every((e) => e.streamId.startsWith('email-') && typeof e.position === 'string'));
  const after = await runRelay(['events', '--prefix', 'email-', '--after', lines[1].position, '--limit', '1'], env);
  assert.is(JSON.parse(after.stdout).id, lines[2].id, 'continues right after the given position');
  const stream = await runRelay(['events', '--stream', `email-${sentIds[0]}`], env);
  const events = stream.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.is(events[0].type, 'EmailAccepted');
  assert.is(events[0].data.emailId, sentIds[0]);
});

test.run();
