// `relay start` with RELAY_PIPELINE_THREAD=on runs the forwarder, the processors and retention on a thread of their own
// (apps/pipeline/pipeline-thread.ts). Shown here: mail is delivered while the main thread cannot run at
// all; /readyz and /metrics of the main thread still cover the thread's parts; stop ends the
// thread; a thread that fails to start fails the start, and one that dies is reported.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startPipelineThread } from '../apps/pipeline/pipeline-thread.ts';
import { ALL_PARTS, PIPELINE_PARTS, startRelay } from '../apps/relay.ts';
import { loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { samplesOf, sumOf, parseMetrics } from './support/metrics.ts';
import { postEmail, runRelay } from './support/relay-process.ts';

const test = suite('the pipeline thread of relay start');
const FATE = new URL('./fixtures/pipeline-thread-fate.ts', import.meta.url);

/** Blocks this thread (no callbacks, no timers) until `condition` holds or `ms` pass. */
function blockUntil(condition: () => boolean, ms: number): boolean {
  const pause = new Int32Array(new SharedArrayBuffer(4));
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (condition()) return true;
    Atomics.wait(pause, 0, 0, 10);
  }
  return condition();
}

test('mail is delivered while the main thread is blocked; readiness, metrics and stop cover the thread', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'relay-pipeline-thread-'));
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: dataDir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey;
  const relay = await startRelay(loadConfig({ RELAY_DATA_DIR: dataDir, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'warn' }), ALL_PARTS, { pipelineThread: true });
  try {
    const sent = await postEmail(relay.url!, apiKey, { from: 'hello@example.test', to: 'you@example.test', subject: 'Threaded', text: 'Hi' });
    // From here on this thread runs nothing: the forwarder, the sender and the outbox must.
    const written = blockUntil(() => existsSync(join(relay.services.outboxDir, `${sent.id}.eml`)), 20_000);
    assert.ok(written, 'the outbox file was written while the main thread was blocked');

    await waitUntil(async () => {
      const detail = await fetch(`${relay.url}/v1/emails/${sent.id}`, { headers: { authorization: `Bearer ${apiKey}` } });
      return ((await detail.json()) as { status: string }).status === 'sent';
    }, 'the projector (on the thread) to show the email sent', 10_000);

    const ready = await relay.partsReady();
    for (const part of PIPELINE_PARTS) assert.is(ready[part], true, `${part} ready`);
    const readyz = await (await fetch(`${relay.url}/readyz`)).json() as { checks: Record<string, boolean> };
    assert.is(readyz.checks.sender, true);

    // Appended on the thread, counted on this thread's /metrics.
    const samples = parseMetrics(await relay.metrics.render());
    assert.is(sumOf(samples, 'relay_events_appended_total', { type: 'EmailAccepted' }), 1);
    await waitUntil(async () => sumOf(parseMetrics(await relay.metrics.render()), 'relay_events_appended_total', { type: 'DeliveryAttempted' }) === 1,
      'the thread\'s DeliveryAttempted to be counted', 5_000);
    assert.ok(samplesOf(samples, 'relay_events_appended_total', { type: 'DeliveryClaimed' }).length === 1);
    // The thread's own metrics (retention runs there) are on this thread's page, once each;
    // the process's own are reported by this thread alone.
    assert.is(sumOf(samples, 'relay_retention_runs_total', { result: 'ok' }), 1, 'retention swept once, at the thread\'s start');
    assert.is(samplesOf(samples, 'relay_retention_last_success_timestamp_seconds').length, 1);
    assert.is(samplesOf(samples, 'process_start_time_seconds').length, 1);
    assert.is(sumOf(samples, 'relay_admissions_total', { result: 'accepted' }), 1, 'the thread\'s zeros add nothing');
  } finally {
    await relay.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});

test('a thread that fails to start fails the start with its reason', async () => {
  process.env.RELAY_TEST_THREAD_FATE = 'fail-start';
  const config = loadConfig({ RELAY_DATA_DIR: tmpdir() });
  try {
    await startPipelineThread({ config, parts: ['sender'] }, { onExit: () => assert.unreachable('not started') }, FATE);
    assert.unreachable('started');
  } catch (error) {
    assert.is((error as Error).message, 'the log could not be opened');
  }
});

test('a thread that dies is reported, and its parts are no longer ready', async () => {
  process.env.RELAY_TEST_THREAD_FATE = 'die-after-ready';
  const config = loadConfig({ RELAY_DATA_DIR: tmpdir() });
  let ended: Error | null = null;
  const thread = await startPipelineThread({ config, parts: ['forwarder', 'sender'] }, { onExit: (error) => void (ended = error) }, FATE);
  await waitUntil(() => ended !== null, 'the thread\'s end to be reported', 10_000);
  assert.is(ended!.message, 'a processor crashed the thread');
  const parts = await thread.partsStatus();
  assert.equal(Object.keys(parts).sort(), ['forwarder', 'sender']);
  for (const status of Object.values(parts)) {
    assert.is(status.state, 'stopped');
    assert.match(status.error!, /the pipeline thread ended: a processor crashed the thread/);
  }
  assert.is(thread.liveness.state, 'stopped');
  await thread.stop();
});

test.run();
