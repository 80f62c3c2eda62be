// `relay projections scratch` and `relay projections drop`, run as the real CLI on the embedded
// stores: a scratch collection `rebuild --into` made is listed and dropped on request; Relay's
// own collections are never dropped, not even with --force; a collection no rebuild recorded,
// or one a rebuild is still writing, only with --force. A swap's record: not renamed yet, its
// collection (the rebuilt read model) is never dropped, the rebuild finishes it; renamed, only
// --force forgets the record, and says the catch-up it owed will not be done.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { EMAILS_PROJECTION } from '../apps/services/projection-registry.ts';
import { markScratchSwapped, recordScratch } from '../apps/services/scratch-collections.ts';
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

const listedRecords = async (dataDir: string) => {
  const listed = await relay(['projections', 'scratch', '--json'], dataDir);
  assert.is(listed.code, 0, where(listed));
  return listed.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as { collection: string; state: string });
};

test('a swap recorded and not renamed yet is never dropped, not even with --force: the next rebuild finishes it', async ({ dataDir }) => {
  // As a rebuild leaves them between recording its swap and renaming (or dying in the rename):
  // one rebuilt collection of no document (its indexes only), one of a document.
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails__rebuild_1', 'emails');
    await EMAILS_PROJECTION.ensureIndexes(stores.documents, 'emails__rebuild_1');
    await markScratchSwapped(stores.documents, 'emails__rebuild_1', 'emails', { catchUpAfter: null, firstVersion: 1 });
    await recordScratch(stores.documents, 'emails__rebuild_2', 'emails');
    await stores.documents.collection('emails__rebuild_2').insert({ _id: 'em_rebuilt' });
    await markScratchSwapped(stores.documents, 'emails__rebuild_2', 'emails', { catchUpAfter: null, firstVersion: 1 });
  });
  for (const collection of ['emails__rebuild_1', 'emails__rebuild_2']) {
    for (const force of [[], ['--force']]) {
      const run = await relay(['projections', 'drop', collection, ...force], dataDir);
      assert.is(run.code, 1, where(run));
      assert.is(run.stdout, '', where(run));
      assert.match(run.stderr, new RegExp(`^relay: not dropped: a rebuild of emails recorded at \\S+ the swap of ${collection} over its live read model and has not renamed it yet .*: ${collection} is the rebuilt read model, maybe its only copy, so it is never dropped, not even with --force; relay projections rebuild emails finishes the swap and its catch-up\n$`), where(run));
    }
  }
  await withStores(dataDir, async (stores) => {
    assert.ok(await stores.documents.exists('emails__rebuild_1'), 'the empty rebuilt collection is still there');
    assert.is(await stores.documents.collection('emails__rebuild_2').count(), 1);
  });
  assert.equal((await listedRecords(dataDir)).map((r) => [r.collection, r.state]), [['emails__rebuild_1', 'swapped'], ['emails__rebuild_2', 'swapped']]);

  // What the refusal says to run does it.
  const rebuilt = await relay(['projections', 'rebuild', 'emails'], dataDir);
  assert.is(rebuilt.code, 0, where(rebuilt));
  assert.match(rebuilt.stderr, /finished first the catch-up emails__rebuild_1 owed after its swap\nfinished first the catch-up emails__rebuild_2 owed after its swap\n/, where(rebuilt));
  assert.equal(await listedRecords(dataDir), []);
  assert.is(await countIn(dataDir, COLLECTIONS.emails), 5, 'the read model is the one the events make');
});

test('a swap renamed and owing its catch-up: drop says the rebuild or the processor finishes it; --force forgets only its record, and says so', async ({ dataDir }) => {
  // As a rebuild leaves it when it dies right after its rename: the rebuilt collection is the live one.
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails__rebuild_3', 'emails');
    await stores.documents.collection('emails__rebuild_3').insert({ _id: 'em_rebuilt' });
    await markScratchSwapped(stores.documents, 'emails__rebuild_3', 'emails', { catchUpAfter: null, firstVersion: 1 });
    await stores.documents.rename('emails__rebuild_3', COLLECTIONS.emails);
  });
  const refused = await relay(['projections', 'drop', 'emails__rebuild_3'], dataDir);
  assert.is(refused.code, 1, where(refused));
  assert.match(refused.stderr, /^relay: not dropped: emails__rebuild_3 was renamed over the live read model of emails at \S+ and is no collection any more; its record stays while the catch-up after the swap is owed, and goes once relay projections rebuild emails, or a start of its processor, finishes it\. --force forgets the record and the catch-up is never done/, where(refused));
  assert.equal((await listedRecords(dataDir)).map((r) => [r.collection, r.state]), [['emails__rebuild_3', 'swapped']]);

  const forced = await relay(['projections', 'drop', 'emails__rebuild_3', '--force'], dataDir);
  assert.is(forced.code, 0, where(forced));
  assert.match(forced.stdout, /^forgot the record of emails__rebuild_3, swapped in as the emails read model at \S+; nothing dropped\n$/, where(forced));
  assert.match(forced.stderr, /^relay: the catch-up it owed will not be done: the emails read model may lack what its processor applied while that rebuild ran, until relay projections rebuild emails\n$/, where(forced));
  assert.equal(await listedRecords(dataDir), [], 'its record is gone');
  await withStores(dataDir, async (stores) => {
    const live = await stores.documents.collection(COLLECTIONS.emails).find({});
    assert.equal(live.map((d) => d._id), ['em_rebuilt'], 'the live read model (the swapped-in collection) is untouched');
  });
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
