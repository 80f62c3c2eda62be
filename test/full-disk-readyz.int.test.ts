// Shows that `relay start` on a data directory whose disk fills up (ENOSPC on the WAL) answers
// /readyz 503 while writes fail, with the stores' reason in the body, and comes back by itself
// once space returns: the group commit remembers a write that failed on the file until a commit
// succeeds (infra/sqlite/group-commit.ts), and the stores' ping says so. While it is set a ping
// tries a write of its own, so readiness returns without waiting for traffic that a process
// out of rotation does not get; writes themselves are never refused for it.
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
import { ALL_PARTS, startRelay } from '../apps/relay.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { runRelay } from './support/relay-process.ts';

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

const test = suite('a full disk under relay start');

interface ReadyReport {
  status: string;
  checks: Record<string, boolean>;
  stores: Record<string, { ready: boolean; reason: string | null }>;
}

test('/readyz is not ready while the disk is full and writes fail, and ready again once space returns', async () => {
  const mount = mkdtempSync(join(tmpdir(), 'relay-full-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mount]);
  const dataDir = join(mount, 'data');
  const filler = join(mount, 'filler');
  mkdirSync(dataDir, { mode: 0o700 });
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'fatal' }), ALL_PARTS, { pipelineThread: true });
  const send = (subject: string) => fetch(`${relay.url}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject, text: 'x'.repeat(4000) }),
  });
  const readyz = async () => {
    const response = await fetch(`${relay.url}/readyz`);
    return { status: response.status, report: await response.json() as ReadyReport };
  };
  try {
    assert.is((await send('before')).status, 202);
    // Fill the file system (dd stops at ENOSPC).
    spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' });
    const refused = await send('while full');
    const body = await refused.text();
    assert.is(refused.status, 500, body);
    const full = await readyz();
    assert.is(full.status, 503, `/readyz answered ${full.status} ${JSON.stringify(full.report.checks)} while every write fails with "database or disk is full"`);
    assert.is(full.report.checks.eventStore, false);
    assert.is(full.report.checks.documentStore, false);
    assert.match(String(full.report.stores.eventStore?.reason), 'database or disk is full');
    assert.match(String(full.report.stores.documentStore?.reason), 'database or disk is full');
    // Anyone who reaches the API reads /readyz: the reason names no path of the server.
    assert.not.ok(JSON.stringify(full.report).includes(mount), 'the data directory is not in /readyz');

    // Space returns; no write comes meanwhile: readiness comes back by the ping's own write.
    rmSync(filler);
    await waitUntil(async () => (await readyz()).status === 200, '/readyz answers 200 once the disk has room', 20_000);
    const ready = await readyz();
    assert.equal(ready.report.stores.eventStore, { ready: true, reason: null });
    assert.is((await send('after')).status, 202, 'writes go through again');
  } finally {
    await relay.stop();
    execFileSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  }
});

test.run();
