// A process-wide worker thread that cannot start makes what needs it answer 503: that must not
// happen with nothing said. The real `relay api`, one thread's module refused by a preloaded
// hook (test/fixtures/refuse-worker-thread.mjs): the request answers 503 in the spec's envelope,
// one error line names the pool, the cause and what is refused, and /metrics shows the pool
// failing. Password hashing (sign-in) and DKIM keys (domain creation).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';
import { freePort, runRelay, spawnRelay } from './support/relay-process.ts';

const test = suite('worker threads that cannot start, in a relay process');
const PRELOAD = new URL('./fixtures/refuse-worker-thread.mjs', import.meta.url).href;
const EMAIL = 'dev@keys.test';
const PASSWORD = 'a password long enough';

/** `relay api` on a new data directory (with a user when asked) whose `worker` module is refused. */
async function refusing(worker: string, withUser: boolean, check: (url: string, output: () => string) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-thread-start-'));
  if (withUser) {
    const created = await runRelay(['user', 'create', '--email', EMAIL, '--password', PASSWORD], { RELAY_DATA_DIR: dataDir });
    assert.is(created.code, 0, created.stderr);
  }
  const port = await freePort();
  const api = spawnRelay(['api'], {
    RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_FORMAT: 'json', NODE_OPTIONS: `--import=${PRELOAD}`, RELAY_TEST_REFUSED_WORKER: worker,
  });
  try {
    const url = `http://127.0.0.1:${port}`;
    await waitUntil(() => fetch(`${url}/healthz`).then((r) => r.ok, () => false), 'relay api to answer', 20_000);
    await check(url, () => api.output());
  } finally {
    await api.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

async function assertSaid(url: string, output: () => string, pool: string, refusal: RegExp): Promise<void> {
  const errorLine = () => output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>)
    .find((entry) => entry.pool === pool && Number(entry.level) >= 50);
  await waitUntil(() => errorLine() !== undefined, `an error line about the ${pool} thread`, 10_000);
  assert.match(String(errorLine()!.msg), new RegExp(`^${pool} threads cannot start: .*is refused on purpose.*; until one does, ${refusal.source}`));
  const metrics = parseMetrics(await (await fetch(`${url}/metrics`)).text());
  assert.is(sumOf(metrics, 'relay_worker_pool_start_failing', { pool }), 1);
  assert.ok(sumOf(metrics, 'relay_worker_thread_start_failures_total', { pool }) >= 1);
}

async function assertUnavailable(response: Response): Promise<void> {
  assert.is(response.status, 503);
  const body = await response.json() as { error?: { code?: string } };
  assert.is(body.error?.code, 'service_unavailable');
}

test('password hashing: sign-ins answer 503, one error line says why, relay_worker_pool_start_failing{pool="password_hashing"} is 1', async () => {
  await refusing('scrypt-worker.ts', false, async (url, output) => {
    await assertUnavailable(await fetch(`${url}/v1/session`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: 'nobody@hashing.test', password: PASSWORD }),
    }));
    await assertSaid(url, output, 'password_hashing', /sign-ins, set-up and password changes are refused \(503\)/);
  });
});

test('DKIM keys: domain creations answer 503 with Retry-After, one error line says why, relay_worker_pool_start_failing{pool="dkim_key_generation"} is 1', async () => {
  await refusing('dkim-key-worker.ts', true, async (url, output) => {
    const signIn = await fetch(`${url}/v1/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email: EMAIL, password: PASSWORD }) });
    assert.is(signIn.status, 200);
    const cookie = signIn.headers.getSetCookie().find((c) => c.startsWith('rr_session='))!.split(';')[0];
    const post = (path: string, body: unknown) => fetch(`${url}${path}`, { method: 'POST', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const workspace = await post('/v1/workspaces', { name: 'Keys' });
    assert.is(workspace.status, 201);
    const { id: workspaceId } = await workspace.json() as { id: string };
    const domain = await post(`/v1/workspaces/${workspaceId}/domains`, { name: 'keys.example.test' });
    assert.is(domain.headers.get('retry-after'), '1');
    await assertUnavailable(domain);
    await assertSaid(url, output, 'dkim_key_generation', /domain creations and DKIM key rotation starts are refused \(503\)/);
  });
});

test.run();
