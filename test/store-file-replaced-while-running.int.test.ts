// Shows that `relay start` notices when the embedded store's files are deleted or replaced under
// it (an operator's `rm`, a cleanup script, a restore moved into place while Relay runs). SQLite
// goes on writing to the unlinked files it holds open, so without a check every send would still
// be answered 202 for data no start of Relay reads. The group commit compares, after each sync
// and in the stores' ping, the WAL and the database file it opened with the files at their paths
// (infra/sqlite/group-commit.ts, #replaced): once they differ the file's writes stop for good, as
// after a failed sync. A send is then refused in the error envelope, never 202; /readyz answers
// 503 with the stores' reason naming the file ("relay.db-wal was deleted or replaced while Relay
// ran: … restart it"), even with no traffic (its ping checks); relay_store_ready is 0 and the
// error line "<store> takes no writes" says why.
// What SQLite does to its own files is no such change: a checkpoint that truncates the WAL, the
// WAL restarting from its beginning after it, and `relay backup` (which renames only files in
// its own directory) leave the stores ready, and what was acknowledged meanwhile survives a crash.
import { copyFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, statSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { freePort, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';

interface Context {
  root: string;
  dataDir: string;
  apiKey: string;
  base: string;
  env: Record<string, string>;
  relay: RelayProcess | null;
}

interface Ready {
  status: number;
  stores: Record<string, { ready: boolean; reason: string | null }>;
}

const test = suite<Context>('store files deleted or replaced under a running relay start');

test.before.each(async (ctx) => {
  ctx.root = mkdtempSync(join(tmpdir(), 'relay-replaced-store-'));
  ctx.dataDir = join(ctx.root, 'data');
  mkdirSync(ctx.dataDir, { mode: 0o700 });
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: ctx.dataDir });
  assert.is(setup.code, 0, setup.stderr);
  ctx.apiKey = JSON.parse(setup.stdout).apiKey as string;
  const port = await freePort();
  ctx.base = `http://127.0.0.1:${port}`;
  ctx.env = { RELAY_DATA_DIR: ctx.dataDir, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json' };
  ctx.relay = spawnRelay(['start'], ctx.env);
  await waitForReady(ctx.base, ctx.relay);
});

test.after.each(async (ctx) => {
  await ctx.relay?.stop();
  rmSync(ctx.root, { recursive: true, force: true });
});

const send = async (ctx: Context, subject: string) => {
  const response = await fetch(`${ctx.base}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject, text: 'the body' }),
  });
  return { status: response.status, body: await response.json() as { id?: string; error?: { code: string } } };
};

const readEmail = async (ctx: Context, id: string) => {
  const response = await fetch(`${ctx.base}/v1/emails/${id}`, { headers: { authorization: `Bearer ${ctx.apiKey}` } });
  return { status: response.status, body: await response.json() as { status?: string; error?: { code: string } } };
};

const readyz = async (ctx: Context): Promise<Ready> => {
  const response = await fetch(`${ctx.base}/readyz`);
  return { status: response.status, stores: (await response.json() as { stores: Ready['stores'] }).stores };
};

const storesReady = async (ctx: Context) => {
  const samples = parseMetrics(await (await fetch(`${ctx.base}/metrics`)).text());
  return Object.fromEntries(samplesOf(samples, 'relay_store_ready').map((s) => [s.labels.store, s.value]));
};

/** The error lines saying a store takes no writes, with their reasons. */
const noWritesLines = (ctx: Context) => ctx.relay!.output().split('\n').filter((line) => line.startsWith('{'))
  .map((line) => JSON.parse(line) as { level: number; msg: string; store?: string; reason?: string })
  .filter((line) => line.level === 50 && / takes no writes: /.test(line.msg));

/** What every case of a changed file shows: not ready naming `file`, the metric at 0, the error line. */
const assertStopped = async (ctx: Context, file: string) => {
  const said = `${file} was deleted or replaced while Relay ran`;
  const ready = await readyz(ctx);
  assert.is(ready.status, 503, `/readyz: ${JSON.stringify(ready.stores)}`);
  assert.is(ready.stores.eventStore.ready, false);
  assert.match(String(ready.stores.eventStore.reason), said);
  assert.match(String(ready.stores.eventStore.reason), 'restart it');
  const metric = await storesReady(ctx);
  assert.is(metric.event_store, 0, `relay_store_ready: ${JSON.stringify(metric)}`);
  assert.is(metric.document_store, 0, `relay_store_ready: ${JSON.stringify(metric)}`);
  await waitUntil(() => noWritesLines(ctx).some((line) => line.store === 'event_store' && String(line.reason).includes(said)), `the error line "event_store takes no writes: ${said}…"`, 10_000);
};

test('relay.db deleted: /readyz says so without traffic, and a send is refused, never 202', async (ctx) => {
  assert.is((await send(ctx, 'before')).status, 202);
  unlinkSync(join(ctx.dataDir, 'relay.db'));

  // No send first: the ping of /readyz finds it.
  await assertStopped(ctx, 'relay.db');
  const after = await send(ctx, 'after relay.db was deleted');
  assert.is(after.status, 500, JSON.stringify(after.body));
  assert.ok(after.body.error?.code, `a refusal in the error envelope: ${JSON.stringify(after.body)}`);
});

test('relay.db-wal deleted: the next send is refused, not acknowledged into the deleted WAL', async (ctx) => {
  assert.is((await send(ctx, 'before')).status, 202);
  unlinkSync(join(ctx.dataDir, 'relay.db-wal'));

  // The send comes first: its batch's check after the sync refuses it.
  const after = await send(ctx, 'after relay.db-wal was deleted');
  assert.is(after.status, 500, JSON.stringify(after.body));
  assert.ok(after.body.error?.code, `a refusal in the error envelope: ${JSON.stringify(after.body)}`);
  await assertStopped(ctx, 'relay.db-wal');
});

test('relay.db replaced by another file moved into place: a send is refused', async (ctx) => {
  assert.is((await send(ctx, 'before')).status, 202);
  const copy = join(ctx.dataDir, 'relay.db.restored');
  copyFileSync(join(ctx.dataDir, 'relay.db'), copy);
  renameSync(copy, join(ctx.dataDir, 'relay.db'));

  const after = await send(ctx, 'after relay.db was replaced');
  assert.is(after.status, 500, JSON.stringify(after.body));
  await assertStopped(ctx, 'relay.db');
});

test('a checkpoint that truncates the WAL, the WAL restarting after it, and relay backup leave the stores ready; what was acknowledged survives a crash', async (ctx) => {
  const wal = join(ctx.dataDir, 'relay.db-wal');
  const walInode = statSync(wal).ino;
  const backup = await runRelay(['backup', join(ctx.root, 'backup')], { RELAY_DATA_DIR: ctx.dataDir });
  assert.is(backup.code, 0, backup.stderr);
  // Another connection checkpoints and truncates the WAL (as an operator's sqlite3 shell may):
  // SQLite keeps the same -wal file, and Relay's next writes restart it from its beginning.
  const other = new DatabaseSync(join(ctx.dataDir, 'relay.db'), { timeout: 5000 });
  try {
    other.prepare('PRAGMA wal_checkpoint(TRUNCATE)').get();
  } finally {
    other.close();
  }
  assert.is(statSync(wal).ino, walInode, 'the same -wal file after the checkpoint');

  const ids: string[] = [];
  for (let i = 0; i < 10; i++) {
    const sent = await send(ctx, `after the checkpoint ${i}`);
    assert.is(sent.status, 202, JSON.stringify(sent.body));
    ids.push(sent.body.id!);
  }
  const ready = await readyz(ctx);
  assert.is(ready.status, 200, JSON.stringify(ready.stores));
  assert.equal(noWritesLines(ctx), [], 'no store said it takes no writes');
  assert.is(statSync(wal).ino, walInode, 'the same -wal file after the writes');

  await ctx.relay!.kill();
  ctx.relay = spawnRelay(['start'], ctx.env);
  await waitForReady(ctx.base, ctx.relay);
  for (const id of ids) assert.is((await readEmail(ctx, id)).status, 200, `${id} survives the crash`);
});

test.run();
