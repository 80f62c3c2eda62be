// Shows that `relay start` on a data directory whose file system is full (the usual way a full
// disk is found: the process was restarted, or crashed, with the disk full) stops with a line
// that names the database file and the cause. Opening relay.db in WAL mode creates relay.db-shm
// and relay.db-wal; on a full disk SQLite reports that as SQLITE_IOERR ("disk I/O error"), which
// reads as a failing disk. openDatabase (infra/sqlite/database.ts) names the path in any error of
// opening or preparing the database and, on SQLITE_IOERR or SQLITE_FULL, says when the file
// system holding it has no space (statfs: no blocks available) or no inodes left.
//
// Needs root (a private mount namespace with a small tmpfs): the file re-runs itself under
// `unshare -m` and skips when it cannot.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runRelay, runRelayWithin } from './support/relay-process.ts';

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

const test = suite('relay start on a full disk');

/** A data directory set up on a tmpfs mounted with `options`, then filled by `fill`; the start's exit and output. */
async function startOnFullDisk(options: string, fill: (mount: string) => void): Promise<{ dataDir: string; code: number | null | 'running'; said: string }> {
  const mount = mkdtempSync(join(tmpdir(), 'relay-full-start-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', options, 'tmpfs', mount]);
  const dataDir = join(mount, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  try {
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
    assert.is(setup.code, 0, setup.stderr);
    fill(mount);
    const run = await runRelayWithin(['start'], { RELAY_DATA_DIR: dataDir });
    return { dataDir, code: run.code, said: run.output.trim() };
  } finally {
    execFileSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  }
}

test('no space left: it stops, naming relay.db and the full device, not only "disk I/O error"', async () => {
  const { dataDir, code, said } = await startOnFullDisk('size=16m', (mount) => {
    spawnSync('dd', ['if=/dev/zero', `of=${join(mount, 'filler')}`, 'bs=64k'], { stdio: 'ignore' }); // stops at ENOSPC
  });
  assert.is.not(code, 'running', 'it cannot run on a full disk');
  assert.is.not(code, 0);
  assert.ok(said.includes(`cannot open ${join(dataDir, 'relay.db')}: `), `names the file: ${JSON.stringify(said)}`);
  assert.ok(said.includes(`no space left on the device holding ${dataDir} (ENOSPC)`), `names the cause: ${JSON.stringify(said)}`);
});

test('no inodes left: it stops, saying so of the device holding relay.db', async () => {
  const { dataDir, code, said } = await startOnFullDisk('size=16m,nr_inodes=64', (mount) => {
    // Every inode taken (relay.db-wal and relay.db-shm cannot be created), the blocks free.
    for (let i = 0; ; i++) {
      try {
        writeFileSync(join(mount, `inode-${i}`), '');
      } catch {
        break;
      }
    }
  });
  assert.is.not(code, 'running', 'it cannot run without inodes');
  assert.is.not(code, 0);
  assert.ok(said.includes(`cannot open ${join(dataDir, 'relay.db')}: `), `names the file: ${JSON.stringify(said)}`);
  assert.ok(said.includes(`no inodes left on the device holding ${dataDir} (ENOSPC)`), `names the cause: ${JSON.stringify(said)}`);
});

test.run();
