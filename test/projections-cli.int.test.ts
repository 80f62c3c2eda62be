// `relay projections scratch` and `relay projections drop`, run as the real CLI on the embedded
// stores: a scratch collection `rebuild --into` made is listed and dropped on request; Relay's
// own collections are never dropped, not even with --force; a collection no rebuild recorded,
// or one a rebuild is still writing, only with --force.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { recordScratch } from '../apps/services/scratch-collections.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, claimed, toNewEvent } from './support/email-events.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

interface Run { args: string[]; code: number | null; stdout: string; stderr: string }

function relay(args: string[], dataDir: string): Promise<Run> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ args, code, stdout, stderr })));
}

const where = (run: Run) => `relay ${run.args.join(' ')} → exit ${run.code}\nstdout: ${run.stdout}\nstderr: ${run.stderr}`;

interface Ctx { dataDir: string }
const test = suite<Ctx>('relay projections scratch | drop');

async function withStores<T>(dataDir: string, work: (stores: Stores) => Promise<T>): Promise<T> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    return await work(stores);
  } finally {
    await stores.close();
  }
}

const countIn = (dataDir: string, collection: string) => withStores(dataDir, (stores) => stores.documents.collection(collection).count());

test.before.each(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-projections-cli-'));
  await withStores(ctx.dataDir, async (stores) => {
    for (let i = 0; i < 5; i++) {
      const emailId = `em_cli${i}`;
      await stores.events.append(emailStreamId(emailId), [toNewEvent(accepted({ emailId })), toNewEvent(claimed())], { expectedRevision: 'no_stream' });
    }
    // The live read model, as the projector would have it, and a collection someone else keeps.
    await stores.documents.collection(COLLECTIONS.emails).insert({ _id: 'em_live' });
    await stores.documents.collection('analyst_notes').insert({ _id: 'note1' });
  });
});

test.after.each((ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

test('a scratch collection made by rebuild --into is listed, then dropped, and listed no more', async ({ dataDir }) => {
  const rebuilt = await relay(['projections', 'rebuild', 'emails', '--into', 'emails_check'], dataDir);
  assert.is(rebuilt.code, 0, where(rebuilt));
  assert.match(rebuilt.stderr, /drop it when done: relay projections drop emails_check/, where(rebuilt));
  assert.is(await countIn(dataDir, 'emails_check'), 5);

  const listed = await relay(['projections', 'scratch', '--json'], dataDir);
  assert.is(listed.code, 0, where(listed));
  const records = listed.stdout.trim().split('\n').map((line) => JSON.parse(line));
  assert.is(records.length, 1, where(listed));
  assert.is(records[0].collection, 'emails_check');
  assert.is(records[0].projection, 'emails');
  assert.is(records[0].state, 'built');

  const dropped = await relay(['projections', 'drop', 'emails_check'], dataDir);
  assert.is(dropped.code, 0, where(dropped));
  assert.match(dropped.stdout, /^dropped emails_check \(scratch collection of emails\)\n$/, where(dropped));
  assert.is(await countIn(dataDir, 'emails_check'), 0);
  const after = await relay(['projections', 'scratch'], dataDir);
  assert.is(after.code, 0, where(after));
  assert.is(after.stdout, '', where(after));
  assert.match(after.stderr, /no scratch collections/, where(after));
});

test("Relay's own collections are never dropped, not even with --force", async ({ dataDir }) => {
  for (const collection of [COLLECTIONS.emails, COLLECTIONS.users, COLLECTIONS.scratchCollections]) {
    for (const force of [[], ['--force']]) {
      const run = await relay(['projections', 'drop', collection, ...force], dataDir);
      assert.is(run.code, 1, where(run));
      assert.match(run.stderr, new RegExp(`^relay: not dropped: ${collection} is one of Relay's own collections`), where(run));
      assert.is(run.stdout, '', where(run));
    }
  }
  assert.is(await countIn(dataDir, COLLECTIONS.emails), 1, 'the live read model is untouched');
});

test('a collection no rebuild recorded is dropped only with --force', async ({ dataDir }) => {
  const refused = await relay(['projections', 'drop', 'analyst_notes'], dataDir);
  assert.is(refused.code, 1, where(refused));
  assert.match(refused.stderr, /analyst_notes is not a scratch collection made by relay projections rebuild .*--force drops it anyway/, where(refused));
  assert.is(await countIn(dataDir, 'analyst_notes'), 1);
  const forced = await relay(['projections', 'drop', 'analyst_notes', '--force'], dataDir);
  assert.is(forced.code, 0, where(forced));
  assert.match(forced.stdout, /^dropped analyst_notes\n$/, where(forced));
  assert.is(await countIn(dataDir, 'analyst_notes'), 0);
});

test('a scratch collection a rebuild is still writing (or died writing) is dropped only with --force', async ({ dataDir }) => {
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails__rebuild_1', 'emails');
    await stores.documents.collection('emails__rebuild_1').insert({ _id: 'em_half' });
  });
  const refused = await relay(['projections', 'drop', 'emails__rebuild_1'], dataDir);
  assert.is(refused.code, 1, where(refused));
  assert.match(refused.stderr, /a rebuild of emails has been writing emails__rebuild_1 since .* \(or died doing so\); --force/, where(refused));
  assert.is(await countIn(dataDir, 'emails__rebuild_1'), 1);
  const listed = await relay(['projections', 'scratch'], dataDir);
  assert.match(listed.stdout, /^emails__rebuild_1 {2}emails {2}building {2}since /, where(listed));
  const forced = await relay(['projections', 'drop', 'emails__rebuild_1', '--force'], dataDir);
  assert.is(forced.code, 0, where(forced));
  assert.is(await countIn(dataDir, 'emails__rebuild_1'), 0);
  assert.is((await relay(['projections', 'scratch', '--json'], dataDir)).stdout, '', 'its record is gone too');
});

test('bad arguments are usage errors (exit 2) that drop nothing', async ({ dataDir }) => {
  const cases: Array<[string[], RegExp]> = [
    [['projections', 'drop'], /projections drop takes one collection/],
    [['projections', 'drop', 'a', 'b'], /projections drop takes one collection/],
    [['projections', 'drop', 'Analyst-Notes'], /must be 1 to 64 lower-case letters/],
    [['projections', 'drop', 'analyst_notes', '--json'], /projections drop takes one collection/],
    [['projections', 'scratch', 'analyst_notes'], /projections scratch takes only --json/],
    [['projections', 'scratch', '--force'], /projections scratch takes only --json/],
    [['projections', 'rebuild', 'emails', '--force'], /^usage: relay projections/],
    [['projections', 'rebuild', 'toString'], /^usage: relay projections/],
  ];
  for (const [args, message] of cases) {
    const run = await relay(args, dataDir);
    assert.is(run.code, 2, where(run));
    assert.match(run.stderr, message, where(run));
  }
  assert.is(await countIn(dataDir, 'analyst_notes'), 1);
});

test.run();
