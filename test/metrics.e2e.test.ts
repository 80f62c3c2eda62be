// /metrics of `relay start` (one process, every part), scraped over HTTP: HTTP requests by
// route pattern (never the raw URL) and status with their latency histogram, admissions by
// result and refusal code with their latency, events appended by type, every processor
// group's lag, parked events, retention passes, and the process's own metrics.
// With RELAY_METRICS_PORT the page moves to a listener of its own and leaves the API's port.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { PROCESSORS } from '../apps/processors/registry.ts';
import { waitUntil } from './support/eventually.ts';
import { scrape, samplesOf, sumOf } from './support/metrics.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';

interface Ctx {
  dataDir: string;
  apiKey: string;
  relay: RelayProcess | null;
}

const test = suite<Ctx>('/metrics of relay start');

test.before(async (ctx) => {
  ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-metrics-'));
  ctx.relay = null;
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: ctx.dataDir });
  assert.is(setup.code, 0, setup.stderr);
  ctx.apiKey = JSON.parse(setup.stdout).apiKey;
});

test.after.each(async (ctx) => {
  await ctx.relay?.kill();
  ctx.relay = null;
});

test.after(async (ctx) => {
  rmSync(ctx.dataDir, { recursive: true, force: true });
});

async function start(ctx: Ctx, env: Record<string, string> = {}): Promise<string> {
  const port = await freePort();
  ctx.relay = spawnRelay(['start'], { RELAY_DATA_DIR: ctx.dataDir, PORT: String(port), ...env });
  const url = `http://127.0.0.1:${port}`;
  await waitForReady(url, ctx.relay, 60_000);
  return url;
}

const email = (subject: string) => ({ from: 'hello@example.test', to: 'you@example.test', subject, text: subject });

test('requests, admissions, appended events, lag of every group and parked events, on the API port', async (ctx) => {
  const url = await start(ctx);
  const post = (body: unknown, headers: Record<string, string> = {}) => fetch(`${url}/v1/emails`, {
    method: 'POST', headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
  });
  const sent = await postEmail(url, ctx.apiKey, email('first'));
  assert.is((await post(email('keyed'), { 'idempotency-key': 'k-1' })).status, 202);
  assert.is((await post(email('keyed'), { 'idempotency-key': 'k-1' })).status, 202, 'the replay');
  assert.is((await post({ from: 'hello@example.test', to: 'you@example.test', text: 'no subject' })).status, 400);
  assert.is((await post(email('bad key'), { authorization: 'Bearer rr_test_nope' })).status, 401);
  assert.is((await fetch(`${url}/v1/emails/${sent.id}`, { headers: { authorization: `Bearer ${ctx.apiKey}` } })).status, 200);
  assert.is((await fetch(`${url}/no/such/route/${sent.id}`)).status, 404);

  const samples = await scrape(url);
  const admissions = (labels: Record<string, string>) => sumOf(samples, 'relay_admissions_total', labels);
  assert.is(admissions({ result: 'accepted' }), 2);
  assert.is(admissions({ result: 'replayed' }), 1);
  assert.is(admissions({ result: 'suppressed' }), 0);
  assert.is(admissions({ result: 'rejected', code: 'validation_error' }), 1);
  assert.is(admissions({ result: 'rejected', code: 'invalid_api_key' }), 1);
  const admissionSeconds = (result: string) => sumOf(samples, 'relay_admission_duration_seconds_count', { result });
  assert.equal(['accepted', 'replayed', 'suppressed', 'rejected'].map(admissionSeconds), [2, 1, 0, 2]);
  assert.ok(sumOf(samples, 'relay_admission_duration_seconds_sum', { result: 'accepted' }) > 0);

  const send202 = { method: 'POST', route: '/v1/emails', status: '202' };
  assert.is(sumOf(samples, 'relay_http_requests_total', send202), 3);
  assert.is(sumOf(samples, 'relay_http_request_duration_seconds_count', send202), 3);
  assert.is(samplesOf(samples, 'relay_http_request_duration_seconds_bucket', { ...send202, le: '+Inf' })[0]?.value, 3);
  assert.ok(sumOf(samples, 'relay_http_request_duration_seconds_sum', send202) > 0);
  assert.is(sumOf(samples, 'relay_http_requests_total', { method: 'POST', route: '/v1/emails', status: '401' }), 1);
  assert.is(sumOf(samples, 'relay_http_requests_total', { method: 'GET', route: '/v1/emails/:id', status: '200' }), 1, 'the route pattern');
  assert.is(sumOf(samples, 'relay_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1);
  assert.ok(samples.every((s) => !(s.labels.route ?? '').includes(sent.id)), 'no raw URL in a label');

  assert.ok(sumOf(samples, 'relay_events_appended_total', { type: 'EmailAccepted' }) >= 2);

  await waitUntil(async () => {
    const now = await scrape(url);
    return PROCESSORS.every((p) => samplesOf(now, 'relay_consumer_lag', { group: `relay.${p.name}` }).length > 0
      && sumOf(now, 'relay_consumer_lag', { group: `relay.${p.name}` }) === 0
      && sumOf(now, 'relay_consumer_committed_offset', { group: `relay.${p.name}` }) > 0);
  }, 'every processor group is listed and catches up', 30_000);
  const later = await scrape(url);
  for (const p of PROCESSORS) assert.is(samplesOf(later, 'relay_parked_events', { processor: p.name })[0]?.value, 0, `${p.name}: nothing parked`);
  assert.ok(sumOf(later, 'relay_log_end_offset', { topic: 'relay.events' }) > 0);
  const collectors = samplesOf(later, 'relay_metrics_collector_up');
  assert.ok(['log_offsets', 'forwarder_lag', 'sites', 'open_claims', 'parked_events'].every((name) => collectors.some((s) => s.labels.collector === name)), 'the log, forwarder, sites, open-claims and parked-events collectors report');
  assert.ok(collectors.every((s) => s.value === 1), `every collector read its values: ${JSON.stringify(collectors)}`);
  assert.ok(sumOf(later, 'relay_http_requests_total', { method: 'GET', route: '/metrics', status: '200' }) >= 1, 'scrapes are counted too');

  // Both accepted emails went to the outbox: counted per recipient, with their latency, and no claim is left open.
  await waitUntil(async () => sumOf(await scrape(url), 'relay_delivery_attempts_total', { transport: 'outbox', outcome: 'sent' }) === 2, 'both deliveries are counted');
  const delivered = await scrape(url);
  assert.is(sumOf(delivered, 'relay_delivery_latency_seconds_count', { transport: 'outbox' }), 2);
  assert.is(sumOf(delivered, 'relay_delivery_attempts_total', { transport: 'outbox', outcome: 'unknown' }), 0);
  assert.is(samplesOf(delivered, 'relay_delivery_attempts_total', { transport: 'outbox', outcome: 'unknown' }).length, 1, 'the unknown series exists from the start, at 0');
  // No report came: each kind and effect is there at 0 (the first report after a start is an increase).
  const feedback = samplesOf(delivered, 'relay_feedback_reports_total');
  assert.is(feedback.length, 18, JSON.stringify(feedback));
  assert.ok(feedback.every((s) => s.value === 0) && samplesOf(delivered, 'relay_feedback_reports_total', { kind: 'hard_bounced', effect: 'recorded' }).length === 1);
  await waitUntil(async () => sumOf(await scrape(url), 'relay_delivery_open_claims') === 0, 'no open claim');

  // Retention swept at start; the process reports itself.
  assert.ok(sumOf(later, 'relay_retention_runs_total', { result: 'ok' }) >= 1);
  assert.is(sumOf(later, 'relay_retention_runs_total', { result: 'failed' }), 0);
  const lastPass = sumOf(later, 'relay_retention_last_success_timestamp_seconds');
  assert.ok(Math.abs(lastPass - Date.now() / 1000) < 600, `last retention pass at ${lastPass}`);
  const started = sumOf(later, 'process_start_time_seconds');
  assert.ok(started > Date.now() / 1000 - 600 && started <= Date.now() / 1000, `started at ${started}`);
  assert.ok(sumOf(later, 'process_cpu_seconds_total') > 0);
  assert.ok(sumOf(later, 'process_resident_memory_bytes') > 10 * 1024 * 1024);
  assert.ok(sumOf(later, 'nodejs_eventloop_lag_max_seconds') >= 0);
});

test('RELAY_METRICS_PORT: /metrics on its own listener only', async (ctx) => {
  const metricsPort = await freePort();
  const url = await start(ctx, { RELAY_METRICS_PORT: String(metricsPort), RELAY_METRICS_HOST: '127.0.0.1' });
  assert.is((await fetch(`${url}/metrics`)).status, 404, 'no longer on the API port');
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  await postEmail(url, ctx.apiKey, email('counted'));
  const samples = await scrape(metricsUrl);
  assert.is(sumOf(samples, 'relay_admissions_total', { result: 'accepted' }), 1, 'counted since this process started');
  assert.is(sumOf(samples, 'relay_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' }), 1, 'the API port\'s 404 for /metrics');
  assert.is((await fetch(`${metricsUrl}/v1/emails`)).status, 404, 'the listener serves nothing else');
  assert.is((await ctx.relay!.stop()).code, 0, 'and it closes on shutdown');
});

test.run();
