// A relay.db whose write lock another process holds (a stale `sqlite3` shell in BEGIN
// IMMEDIATE, a backup tool, a hung process) refuses every write of `relay start` ("database is
// locked" after the 5 s busy timeout). The group commit remembers such a write as a write
// failure of its own (infra/sqlite/group-commit.ts), so /readyz answers 503 with a reason that
// says so, relay_store_ready is 0, the log says it once per store at error, and all of it comes
// back once the lock is let go (the ping's own write goes through), without any send.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { freePort, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';
import { holdWriteLock, type WriteLockHolder } from './support/write-lock-holder.ts';

const test = suite('a store whose write lock another process holds');

interface ReadyReport {
  checks: Record<string, boolean>;
  stores: Record<string, { ready: boolean; reason: string | null }>;
}

interface LogLine { level: number; msg: string; store?: string; reason?: string }

test('/readyz 503 and relay_store_ready 0 while writes fail on the held lock, one error line per store; all back once it is let go', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-locked-'));
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const port = await freePort();
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_LOG_FORMAT: 'json', RELAY_LOG_LEVEL: 'info' });
  const base = `http://127.0.0.1:${port}`;
  const send = (subject: string) => fetch(`${base}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ from: 'hello@example.test', to: 'you@example.test', subject, text: 'x' }),
  });
  const readyz = async () => {
    const response = await fetch(`${base}/readyz`);
    return { status: response.status, report: await response.json() as ReadyReport };
  };
  const storesReady = async () => Object.fromEntries(samplesOf(parseMetrics(await (await fetch(`${base}/metrics`)).text()), 'relay_store_ready').map((s) => [s.labels.store, s.value]));
  const logLines = (): LogLine[] => relay.output().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as LogLine);
  const storeLines = (level: number, store: string) => logLines().filter((l) => l.level === level && l.store === store);
  let holder: WriteLockHolder | null = null;
  try {
    await waitForReady(base, relay);
    assert.equal(await storesReady(), { event_store: 1, document_store: 1, log: 1 });

    holder = await holdWriteLock(join(dataDir, 'relay.db'));
    // The write waits the busy timeout, then fails: a store that takes no writes is a 500 (apps/api/INTERFACE-DECISIONS.md).
    const refused = await send('locked');
    assert.is(refused.status, 500);
    assert.equal(await refused.json(), { error: { code: 'internal_error', message: 'internal server error' } });

    const locked = await readyz();
    assert.is(locked.status, 503, `/readyz answered ${locked.status} (${JSON.stringify(locked.report.stores)}) while every write fails on the held lock`);
    assert.is(locked.report.checks.eventStore, false);
    assert.is(locked.report.checks.documentStore, false);
    for (const store of ['eventStore', 'documentStore']) {
      assert.match(String(locked.report.stores[store].reason), /write lock has been held by another connection since \d{4}-\d\d-\d\dT[\d:.]+Z, past the 5 s busy timeout/);
    }
    assert.not.ok(JSON.stringify(locked.report).includes(dataDir), 'the data directory is not in /readyz');
    const notReady = await storesReady();
    assert.equal(notReady, { event_store: 0, document_store: 0, log: 1 }, 'relay_store_ready has /readyz\'s verdict');

    await waitUntil(() => storeLines(50, 'event_store').length > 0 && storeLines(50, 'document_store').length > 0, 'the log says at error that each store takes no writes', 10_000);
    const [line] = storeLines(50, 'event_store');
    assert.match(line.msg, 'event_store takes no writes: ');
    assert.match(String(line.reason), 'held by another connection since');
    // Another write fails the same way: the same cause, no second line.
    assert.is((await send('still locked')).status, 500);
    await waitUntil(async () => (await readyz()).status === 503, 'still not ready');
    assert.is(storeLines(50, 'event_store').length, 1, 'one error line per cause');
    assert.is(storeLines(50, 'document_store').length, 1, 'one error line per cause');

    // Let go; no send comes: readiness returns by the ping's own write.
    await holder.release();
    holder = null;
    await waitUntil(async () => (await readyz()).status === 200, '/readyz answers 200 once the lock is let go', 20_000);
    assert.equal((await readyz()).report.stores.eventStore, { ready: true, reason: null });
    assert.equal(await storesReady(), { event_store: 1, document_store: 1, log: 1 });
    await waitUntil(() => storeLines(30, 'event_store').length > 0, 'the log says at info that the store takes writes again', 5_000);
    assert.is((await send('after')).status, 202, 'writes go through again');
  } finally {
    holder?.kill();
    await relay.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
