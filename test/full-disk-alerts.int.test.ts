// On a full disk `relay start` answers /readyz 503 (checks.eventStore/documentStore false,
// "database or disk is full") and every send fails with 500; /metrics says so with the same
// verdict (relay_store_ready 0 for both stores), and RelayStoreNotReady of
// ops/prometheus/relay-rules.yml fires on the scraped page held for an hour (promtool), where the
// page of the same process before the disk filled fires nothing. Once the disk has room the
// series is 1 again.
//
// Needs root (a private mount namespace with a small tmpfs), as test/full-disk-readyz.int.test.ts.
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
import { parseMetrics, samplesOf, type Sample } from './support/metrics.ts';
import { runRelay } from './support/relay-process.ts';
import { firingAlerts, promtoolMissing } from './support/alerts.ts';

if (process.env.RELAY_TEST_IN_NAMESPACE !== '1') {
  const missing = await promtoolMissing();
  if (process.getuid?.() !== 0 || missing) {
    console.log(`skipped: ${missing ?? 'mounting a tmpfs in a private mount namespace needs root'}`);
    process.exit(0);
  }
  const run = spawnSync('unshare', ['-m', process.execPath, fileURLToPath(import.meta.url)], {
    stdio: 'inherit', env: { ...process.env, RELAY_TEST_IN_NAMESPACE: '1' },
  });
  if (run.error) console.log(`skipped: unshare -m is not available (${run.error.message})`);
  process.exit(run.error ? 0 : run.status ?? 1);
}

const test = suite('a full disk shows on /metrics and fires an alert');

test('while /readyz answers 503 for a full disk, relay_store_ready is 0 and RelayStoreNotReady fires; none before, 1 again after', async () => {
  const mount = mkdtempSync(join(tmpdir(), 'relay-full-alerts-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', mount]);
  const dataDir = join(mount, 'data');
  const filler = join(mount, 'filler');
  mkdirSync(dataDir, { mode: 0o700 });
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'fatal' }), ALL_PARTS, { pipelineThread: true });
  const scrape = async () => {
    const scrapedAt = Date.now();
    const samples = parseMetrics(await (await fetch(`${relay.url}/metrics`)).text());
    return { scrapedAt, samples };
  };
  const storesReady = (samples: Sample[]) => Object.fromEntries(samplesOf(samples, 'relay_store_ready').map((s) => [s.labels.store, s.value]));
  try {
    const healthy = await scrape();
    assert.equal(storesReady(healthy.samples), { event_store: 1, document_store: 1, log: 1 });
    assert.equal(await firingAlerts(healthy.samples, healthy.scrapedAt), [], 'a healthy process fires no alert');

    spawnSync('dd', ['if=/dev/zero', `of=${filler}`, 'bs=64k'], { stdio: 'ignore' });
    const refused = await fetch(`${relay.url}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject: 'while full', text: 'x'.repeat(4000) }),
    });
    assert.is(refused.status, 500, 'the send fails');
    const readyz = await fetch(`${relay.url}/readyz`);
    const report = await readyz.json() as { stores: Record<string, { reason: string | null }> };
    assert.is(readyz.status, 503, 'the process says it is not ready');
    assert.match(String(report.stores.eventStore.reason), 'database or disk is full');

    const full = await scrape();
    assert.equal(storesReady(full.samples), { event_store: 0, document_store: 0, log: 1 }, 'relay_store_ready has /readyz\'s verdict');
    const fired = await firingAlerts(full.samples, full.scrapedAt);
    assert.ok(fired.includes('RelayStoreNotReady'), `RelayStoreNotReady does not fire while /readyz answers 503 (stores: ${JSON.stringify(report.stores)}); fired: ${JSON.stringify(fired)}`);

    // Room again, and no send: the scrape's ping writes its one page, and the series is 1 again.
    rmSync(filler, { force: true });
    await waitUntil(async () => Object.values(storesReady((await scrape()).samples)).every((v) => v === 1), 'relay_store_ready is 1 again once the disk has room', 20_000);
  } finally {
    rmSync(filler, { force: true });
    await relay.stop();
    execFileSync('umount', ['-l', mount]);
    rmSync(mount, { recursive: true, force: true });
  }
});

test.run();
