// Shows that a write that fills the disk partway through a large row is reported as the full
// disk it is. SQLite cannot undo only the statement then (it had spilled pages), so it rolls back
// the whole transaction, and with it the write's savepoint: the group commit gives the write's own
// error (SQLITE_FULL, "database or disk is full") rather than the "no such savepoint" a ROLLBACK
// TO would throw (infra/sqlite/group-commit.ts, #runNow), fails every other write of the batch
// with it (their rows went with the transaction), remembers it as the store's write failure, and
// begins the next batch afresh.
//   - `relay api`: a 4 MB send on a full disk fails in the error envelope; the error line names
//     the full disk, /readyz answers 503 with `stores.<store>.reason` saying so, and once the disk
//     has room a send is 202 and /readyz 200 again.
//   - The group commit itself: a small write and a large one in one batch both fail with
//     SQLITE_FULL; writeFailure names it; after room returns the next batch commits.
//
// Needs root (a private mount namespace with a small tmpfs): the file re-runs itself under
// `unshare -m` and skips when it cannot.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { openDatabase } from '../infra/sqlite/database.ts';
import { GroupCommit } from '../infra/sqlite/group-commit.ts';
import { waitUntil } from './support/eventually.ts';
import { freePort, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';

if (process.env.RELAY_TEST_IN_NAMESPACE !== '1') {
  if (process.getuid?.() !== 0) {
    console.log('skipped: mounting a tmpfs in a private mount namespace needs root');
    process.exit(0);
  }
  const run = spawnSync('unshare', ['-m', process.execPath, fileURLToPath(import.meta.url)], {
    stdio: 'inherit', env: { ...process.env, RELAY_TEST_IN_NAMESPACE: '1' },
  });
  if (run.error) console.log(`skipped: unshare -m is not available (${run.error.message})`);
  process.exit(run.error ? 0 : run.status ?? 1);
}

const test = suite('a large write on a full disk');

/** A small tmpfs of `size`, mounted for `body` and gone after it; `fill` fills it up, `free` gives the room back. */
async function onSmallDisk(size: string, body: (disk: { dir: string; fill: () => void; free: () => void }) => Promise<void>): Promise<void> {
  const mount = mkdtempSync(join(tmpdir(), 'relay-full-large-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', mount]);
  const filler = join(mount, 'filler');
  const dir = join(mount, 'data');
  mkdirSync(dir, { mode: 0o700 });
  try {
    await body({
      dir,
      fill: () => void spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' }), // stops at ENOSPC
      free: () => rmSync(filler, { force: true }),
    });
  } finally {
    rmSync(filler, { force: true });
    execFileSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  }
}

test('relay api: a 4 MB send on a full disk fails; the log and /readyz name the full disk; a send goes through once there is room', async () => {
  await onSmallDisk('24m', async ({ dir: dataDir, fill, free }) => {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
    assert.is(setup.code, 0, setup.stderr);
    const apiKey = JSON.parse(setup.stdout).apiKey as string;
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const relay = spawnRelay(['api'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_LEVEL: 'info', RELAY_LOG_FORMAT: 'json' });
    const send = (text: string) => fetch(`${base}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject: 'a large one', html: `<p>${'x'.repeat(text.length)}</p>`, text }),
    });
    try {
      await waitForReady(base, relay);
      fill();
      const response = await send('y'.repeat(2_000_000));
      const body = await response.json() as { error?: { code: string } };
      assert.is(response.status, 500, 'nothing can be stored on a full disk');
      assert.ok(body.error?.code, `the error envelope: ${JSON.stringify(body)}`);
      // Positive marker: the failed request's error line.
      const errorLines = () => relay.output().split('\n').filter((line) => line.includes('"level":50'))
        .map((line) => JSON.parse(line) as { err?: { message?: string }; msg: string; reason?: string });
      await waitUntil(() => errorLines().length > 0, 'the failed send is logged at error', 10_000);
      const logged = errorLines().map((line) => `${line.err?.message ?? line.msg} ${line.reason ?? ''}`);
      assert.ok(logged.some((message) => /database or disk is full/.test(message)), `the log: ${JSON.stringify(logged)}`);
      assert.not.ok(logged.some((message) => /no such savepoint/.test(message)), `the log: ${JSON.stringify(logged)}`);
      const ready = await fetch(`${base}/readyz`);
      const report = await ready.json() as { stores: Record<string, { ready: boolean; reason: string | null }> };
      assert.is(ready.status, 503, JSON.stringify(report.stores));
      assert.match(String(report.stores.eventStore.reason), 'database or disk is full');

      free();
      await waitUntil(async () => (await fetch(`${base}/readyz`)).status === 200, '/readyz is 200 again once the disk has room', 20_000);
      const again = await send('y'.repeat(200_000));
      assert.is(again.status, 202, JSON.stringify(await again.json()));
    } finally {
      await relay.stop();
    }
  });
});

test('the group commit: every write of the batch fails with SQLITE_FULL, the failure is remembered, and the next batch commits', async () => {
  await onSmallDisk('8m', async ({ dir, fill, free }) => {
    const db = openDatabase(join(dir, 'large.db'));
    const commits = new GroupCommit(db);
    try {
      db.exec('CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB)');
      const insert = db.prepare('INSERT INTO rows (body) VALUES (?)');
      fill();
      // One turn: both join one batch, the small one first (it fits in the WAL pages at hand).
      const small = commits.run(() => insert.run(Buffer.alloc(10)));
      const large = commits.run(() => insert.run(Buffer.alloc(4 * 1024 * 1024, 1)));
      const [smallResult, largeResult] = await Promise.allSettled([small, large]);
      for (const [name, result] of [['the small write', smallResult], ['the large write', largeResult]] as const) {
        assert.is(result.status, 'rejected', `${name} fails: its row went with the transaction`);
        const error = (result as PromiseRejectedResult).reason as Error & { errcode?: number };
        assert.match(error.message, 'database or disk is full', `${name}: ${error.message}`);
        assert.is((error.errcode ?? 0) & 0xff, 13, `${name}: SQLITE_FULL`);
      }
      assert.match(String(commits.writeFailure?.message), 'database or disk is full');
      assert.is(db.isTransaction, false);
      assert.is(commits.open, false);

      free();
      await commits.run(() => insert.run(Buffer.alloc(10)));
      assert.is(commits.writeFailure, null, 'a commit that wrote clears it');
      assert.is((db.prepare('SELECT count(*) AS n FROM rows').get() as { n: number }).n, 1, 'only the write after the room came back');
    } finally {
      await commits.flush();
      commits.dispose();
      db.close();
    }
  });
});

test.run();
