// `relay projections rebuild NAME --into COLLECTION` drops COLLECTION first, so it refuses what
// `relay projections drop` refuses (the rebuild has no --force), and leaves it and its record as
// they were: a swap recorded and not renamed yet (another projection's rebuilt read model, maybe
// its only copy) or renamed and owing its catch-up, a collection a rebuild is still writing, one
// no rebuild recorded; and one built for another projection. Its own projection's built
// collection is rebuilt again.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openStores, type Stores } from '../apps/runtime.ts';
import { listScratch, markScratchSwapped, recordScratch } from '../apps/services/scratch-collections.ts';
import { emailStreamId } from '../domain/email/events.ts';
import { loadConfig } from '../infra/config.ts';
import { accepted, toNewEvent } from './support/email-events.ts';

const MAIN = fileURLToPath(new URL('../apps/cli/main.ts', import.meta.url));

function relay(args: string[], dataDir: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('RELAY_') && !['PORT', 'HOST', 'NODE_ENV'].includes(k)));
  const child = spawn(process.execPath, [MAIN, ...args], { env: { ...base, RELAY_LOG_LEVEL: 'silent', RELAY_DATA_DIR: dataDir }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

async function withStores<T>(dataDir: string, work: (stores: Stores) => Promise<T>): Promise<T> {
  const stores = await openStores(loadConfig({ RELAY_DATA_DIR: dataDir, RELAY_LOG_LEVEL: 'silent' }));
  try {
    return await work(stores);
  } finally {
    await stores.close();
  }
}

const test = suite<{ dataDir: string }>('rebuild --into guards');

test.before.each(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-rebuild-into-'));
  await withStores(ctx.dataDir, async (stores) => {
    await stores.events.append(emailStreamId('em_i1'), [toNewEvent(accepted({ emailId: 'em_i1' }))], { expectedRevision: 'no_stream' });
  });
});

test.after.each(({ dataDir }) => rmSync(dataDir, { recursive: true, force: true }));

test('--into a swap recorded and not renamed yet (another projection\'s rebuilt read model) is refused and left alone', async ({ dataDir }) => {
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails__rebuild_9', 'emails');
    await stores.documents.collection('emails__rebuild_9').insert({ _id: 'em_rebuilt' });
    await markScratchSwapped(stores.documents, 'emails__rebuild_9', 'emails', { catchUpAfter: null, firstVersion: 1 });
  });
  const drop = await relay(['projections', 'drop', 'emails__rebuild_9', '--force'], dataDir);
  assert.is(drop.code, 1, 'sanity: drop --force refuses it');
  const run = await relay(['projections', 'rebuild', 'deliverability', '--into', 'emails__rebuild_9'], dataDir);
  const after = await withStores(dataDir, async (stores) => ({
    docs: (await stores.documents.collection('emails__rebuild_9').find({})).map((d) => d._id),
    record: (await listScratch(stores.documents)).find((r) => r._id === 'emails__rebuild_9'),
  }));
  assert.equal([after.record?.projection, after.record?.state], ['emails', 'swapped'],
    `the emails swap's record (its owed rename and catch-up) is now ${JSON.stringify(after.record)}; rebuild exit ${run.code}: ${run.stdout}${run.stderr}`);
  assert.equal(after.docs, ['em_rebuilt'], 'the rebuilt emails read model is still there');
});

test('--into a collection another rebuild is still writing is refused, as drop refuses it without --force', async ({ dataDir }) => {
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails_compare', 'emails');
    await stores.documents.collection('emails_compare').insert({ _id: 'em_half_written' });
  });
  const drop = await relay(['projections', 'drop', 'emails_compare'], dataDir);
  assert.is(drop.code, 1, 'sanity: drop refuses it without --force');
  const run = await relay(['projections', 'rebuild', 'deliverability', '--into', 'emails_compare'], dataDir);
  assert.is.not(run.code, 0, `rebuild --into a collection a rebuild of emails is writing: exit ${run.code}; ${run.stdout}${run.stderr}`);
  assert.match(run.stderr, /not rebuilt: a rebuild of emails has been writing emails_compare/);
  const same = await relay(['projections', 'rebuild', 'emails', '--into', 'emails_compare'], dataDir);
  assert.is(same.code, 1, `nor by a rebuild of the same projection: it cannot tell a live writer from a dead one; ${same.stderr}`);
  const docs = await withStores(dataDir, async (stores) => (await stores.documents.collection('emails_compare').find({})).map((d) => d._id));
  assert.equal(docs, ['em_half_written']);
});

test('--into a swap renamed and owing its catch-up is refused: its record stays', async ({ dataDir }) => {
  await withStores(dataDir, async (stores) => {
    await recordScratch(stores.documents, 'emails__rebuild_8', 'emails');
    await markScratchSwapped(stores.documents, 'emails__rebuild_8', 'emails', { catchUpAfter: null, firstVersion: 1 });
  });
  const run = await relay(['projections', 'rebuild', 'deliverability', '--into', 'emails__rebuild_8'], dataDir);
  assert.is(run.code, 1, `${run.stdout}${run.stderr}`);
  assert.match(run.stderr, /emails__rebuild_8 was swapped in as the live read model of emails/);
  const record = await withStores(dataDir, async (stores) => (await listScratch(stores.documents)).find((r) => r._id === 'emails__rebuild_8'));
  assert.equal([record?.projection, record?.state], ['emails', 'swapped']);
});

test('--into a collection no rebuild recorded is refused; one built for another projection too; its own is rebuilt again', async ({ dataDir }) => {
  await withStores(dataDir, (stores) => stores.documents.collection('my_notes').insert({ _id: 'note' }));
  const mine = await relay(['projections', 'rebuild', 'emails', '--into', 'my_notes'], dataDir);
  assert.is(mine.code, 1, `${mine.stdout}${mine.stderr}`);
  assert.match(mine.stderr, /my_notes exists and is not a scratch collection/);
  assert.equal(await withStores(dataDir, async (stores) => (await stores.documents.collection('my_notes').find({})).map((d) => d._id)), ['note']);

  const built = await relay(['projections', 'rebuild', 'emails', '--into', 'emails_check'], dataDir);
  assert.is(built.code, 0, built.stderr);
  const other = await relay(['projections', 'rebuild', 'deliverability', '--into', 'emails_check'], dataDir);
  assert.is(other.code, 1, `${other.stdout}${other.stderr}`);
  assert.match(other.stderr, /emails_check holds a rebuild of emails/);
  const again = await relay(['projections', 'rebuild', 'emails', '--into', 'emails_check'], dataDir);
  assert.is(again.code, 0, again.stderr);
  const records = await withStores(dataDir, async (stores) => (await listScratch(stores.documents)).map((r) => [r._id, r.projection, r.state]));
  assert.equal(records, [['emails_check', 'emails', 'built']]);
});

test.run();
