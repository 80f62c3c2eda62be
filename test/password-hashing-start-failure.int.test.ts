// A password-hashing thread that cannot start makes every sign-in answer 503: that must not
// happen with nothing said. The real `relay api`, its hashing thread refused by a preloaded
// module hook (test/fixtures/refuse-hashing-thread.mjs): the sign-in answers 503 in the spec's
// envelope, one error line names the pool and the cause, and /metrics shows the pool failing.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';
import { freePort, spawnRelay } from './support/relay-process.ts';

const test = suite('password hashing thread that cannot start');
const PRELOAD = new URL('./fixtures/refuse-hashing-thread.mjs', import.meta.url).href;

test('sign-ins answer 503, one error line says why, and relay_worker_pool_start_failing{pool="password_hashing"} is 1', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-hashing-start-'));
  const port = await freePort();
  const api = spawnRelay(['api'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_FORMAT: 'json', NODE_OPTIONS: `--import=${PRELOAD}` });
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitUntil(() => fetch(`${url}/healthz`).then((r) => r.ok, () => false), 'relay api to answer', 20_000);
    const signIn = await fetch(`${url}/v1/session`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'nobody@hashing.test', password: 'a password long enough' }),
    });
    assert.is(signIn.status, 503);
    const body = await signIn.json() as { error?: { code?: string } };
    assert.is(body.error?.code, 'service_unavailable');

    const errorLine = () => api.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((entry) => entry.pool === 'password_hashing' && Number(entry.level) >= 50);
    await waitUntil(() => errorLine() !== undefined, 'an error line about the hashing thread', 10_000);
    assert.match(String(errorLine()!.msg), /^password_hashing threads cannot start: .*the hashing thread is refused on purpose.*; until one does, sign-ins, set-up and password changes are refused \(503\)/);

    const metrics = parseMetrics(await (await fetch(`${url}/metrics`)).text());
    assert.is(sumOf(metrics, 'relay_worker_pool_start_failing', { pool: 'password_hashing' }), 1);
    assert.ok(sumOf(metrics, 'relay_worker_thread_start_failures_total', { pool: 'password_hashing' }) >= 1);
  } finally {
    await api.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
