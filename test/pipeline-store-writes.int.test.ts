// `relay start` runs its consumer groups on a pipeline thread with sqlite connections of its
// own. A write failure only that thread sees (here: relay.db's write lock held by another
// process while the sender records an outcome; the API thread's next write, its rate limiter's
// sweep, comes 10 s after the send) makes the stores not ready as one of the API thread's does:
// /readyz 503 with a reason naming the thread, relay_store_ready 0, one error line per store
// for the streak (the API thread's own writes failing on the same lock later add none), and all
// of it back once the lock is let go. Without it, only the parts went not ready, after 60 s.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { deferred, waitUntil } from './support/eventually.ts';
import { parseMetrics, samplesOf } from './support/metrics.ts';
import { freePort, runRelay, spawnRelay, waitForReady } from './support/relay-process.ts';
import { holdWriteLock, type WriteLockHolder } from './support/write-lock-holder.ts';
import { startSmtpSink, type DataAnswer } from './support/smtp-sink.ts';

const test = suite('a store whose writes fail on the pipeline thread only');

interface ReadyReport {
  checks: Record<string, boolean>;
  stores: Record<string, { ready: boolean; reason: string | null }>;
}

interface LogLine { level: number; msg: string; store?: string; reason?: string }

const LOCK_HELD = /^pipeline thread: writes to the database file fail: its write lock has been held by another connection since \d{4}-\d\d-\d\dT[\d:.]+Z, past the 5 s busy timeout/;

test('/readyz 503, relay_store_ready 0 and one error line per store while the pipeline thread\'s writes fail; back once the lock is let go', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-pipeline-locked-'));
  const dataReached = deferred();
  const answerData = deferred<DataAnswer>();
  const sink = await startSmtpSink({
    onData: () => {
      dataReached.resolve();
      return answerData.promise;
    },
  });
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const port = await freePort();
  const relay = spawnRelay(['start'], {
    RELAY_DATA_DIR: dataDir, PORT: String(port), RELAY_PIPELINE_THREAD: 'on', RELAY_LOG_FORMAT: 'json', RELAY_LOG_LEVEL: 'info',
    RELAY_DELIVERY: 'smtp', RELAY_SMTP_URL: `smtp://127.0.0.1:${sink.port}?tls=none`,
  });
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

    // The sender (pipeline thread) is in its transaction; the API thread has nothing left to write.
    assert.is((await send('held at data')).status, 202);
    await dataReached.promise;
    holder = await holdWriteLock(join(dataDir, 'relay.db'));
    // Accepted: the sender's write of the outcome now waits for the lock, and fails.
    answerData.resolve({ reply: 'queued' });

    let locked = await readyz();
    await waitUntil(async () => (locked = await readyz()).status === 503, '/readyz answers 503 while the pipeline thread\'s writes fail', 20_000);
    for (const store of ['eventStore', 'documentStore']) {
      assert.is(locked.report.stores[store].ready, false);
      assert.match(String(locked.report.stores[store].reason), LOCK_HELD);
    }
    // The stores say it, not the parts: they are still within their 60 s of recovering.
    assert.equal(Object.keys(locked.report.checks).filter((check) => !locked.report.checks[check]).sort(), ['documentStore', 'eventStore']);
    assert.not.ok(JSON.stringify(locked.report).includes(dataDir), 'the data directory is not in /readyz');
    assert.equal(await storesReady(), { event_store: 0, document_store: 0, log: 1 }, 'relay_store_ready has /readyz\'s verdict');

    await waitUntil(() => storeLines(50, 'event_store').length > 0 && storeLines(50, 'document_store').length > 0, 'the log says at error that each store takes no writes', 10_000);
    const [line] = storeLines(50, 'event_store');
    assert.match(line.msg, 'event_store takes no writes: pipeline thread: ');
    assert.match(String(line.reason), LOCK_HELD);

    // The API thread's writes now fail on the same lock too: the same streak, told once.
    assert.is((await send('api thread locked')).status, 500);
    const both = await readyz();
    assert.is(both.status, 503);
    assert.match(String(both.report.stores.eventStore.reason), LOCK_HELD, 'the reason of the thread whose writes failed first');
    await waitUntil(async () => (await readyz()).status === 503, 'still not ready');
    assert.is(storeLines(50, 'event_store').length, 1, 'one error line per store for the streak');
    assert.is(storeLines(50, 'document_store').length, 1, 'one error line per store for the streak');

    await holder.release();
    holder = null;
    await waitUntil(async () => (await readyz()).status === 200, '/readyz answers 200 once the lock is let go', 20_000);
    const ready = await readyz();
    assert.equal(ready.report.stores.eventStore, { ready: true, reason: null });
    assert.equal(ready.report.stores.documentStore, { ready: true, reason: null });
    assert.equal(await storesReady(), { event_store: 1, document_store: 1, log: 1 });
    await waitUntil(() => storeLines(30, 'event_store').length > 0 && storeLines(30, 'document_store').length > 0, 'the log says at info that each store takes writes again', 5_000);
    assert.is(storeLines(50, 'event_store').length, 1, 'no error line after the streak');
    assert.is((await send('after')).status, 202, 'writes go through again');
  } finally {
    answerData.resolve({ reply: 'queued' });
    holder?.kill();
    await relay.stop();
    await sink.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test.run();
