// Admission flow control (apps/services/admission-flow.ts) through the real API and a real log:
// a send waits while the watched consumer group is behind, goes ahead once it has caught up (the
// group started by another Relay on the same stores), or after the longest wait however far
// behind it is, and nothing is refused or lost either way. Embedded (the sqlite log), and on
// Kafka + a MongoDB-wire store when configured (the API then reads the group's offsets from
// Kafka, and a forwarder publishes the events).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { startRelay, type Part, type RunningRelay } from '../apps/relay.ts';
import { eventsTopic, groupOf } from '../apps/pipeline/topics.ts';
import { slowestGroupBacklog } from '../apps/services/admission-flow.ts';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { waitUntil } from './support/eventually.ts';
import { parseMetrics, sumOf } from './support/metrics.ts';
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { postEmail, runRelay } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

type Ctx = { dataDir: string; apiKey: string; running: RunningRelay[]; env: Record<string, string>; parts: Part[] };

async function start(ctx: Ctx, parts: Part[], env: Record<string, string> = {}): Promise<RunningRelay> {
  const config = loadConfig({ ...ctx.env, PORT: '0', RELAY_INBOUND_SMTP_PORT: '0', RELAY_LOG_LEVEL: 'error', RELAY_METRICS: 'on', ...env });
  const relay = await startRelay(config, parts);
  ctx.running.push(relay);
  return relay;
}

/** The API, and where the log does not read the event store itself (Kafka), the forwarder. */
const startApi = (ctx: Ctx, env: Record<string, string>) => start(ctx, ctx.parts, env);

const message = (n: number) => ({ from: 'hello@example.test', to: `you${n}@example.test`, subject: `Flow ${n}`, text: 'Hi' });
const metric = async (relay: RunningRelay, name: string, labels: Record<string, string> = {}) => sumOf(parseMetrics(await relay.metrics.render()), name, labels);

/** Sends until the projector's group, which no process runs yet, is more than `records` behind. */
async function fillBacklog(ctx: Ctx, relay: RunningRelay, records: number): Promise<string[]> {
  const apiKey = ctx.apiKey;
  const { logNamespace } = loadConfig(ctx.env);
  const topic = eventsTopic(logNamespace);
  const group = groupOf(logNamespace, 'projector');
  const ids: string[] = [];
  const deadline = Date.now() + 30_000;
  for (;;) {
    // Kafka may not know a new topic's partition leaders for a moment: read again.
    const backlog = await slowestGroupBacklog(relay.stores.log, topic, [group]).catch((error: unknown) => {
      if (Date.now() > deadline) throw error;
      return null;
    });
    if (backlog === null) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      continue;
    }
    if (backlog > records) break;
    ids.push((await postEmail(relay.url!, apiKey, message(ids.length))).id);
    // Where a forwarder publishes (Kafka), the backlog grows after the 202: read it once the
    // send's events are on the log, or the gate could see more than this loop did and hold a
    // send of it.
    await waitUntil(async () => (await metric(relay, 'relay_forwarder_lag')) === 0, 'the forwarder to publish the send', 10_000);
  }
  // The gate reads the backlog at most every 50 ms: let its last read (taken while the backlog
  // was still under the bound) age, so that the next send reads it again.
  await new Promise((resolve) => setTimeout(resolve, 60));
  return ids;
}

function flowSuite(mode: string, storesEnv: () => Record<string, string>, parts: Part[], skipReason?: string): void {
  const test = skippableSuite<Ctx>(`admission flow control [${mode}]`, skipReason);

  test.before.each(async (ctx) => {
    ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-admission-flow-'));
    ctx.env = { RELAY_DATA_DIR: ctx.dataDir, ...storesEnv() };
    ctx.parts = parts;
    const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], ctx.env);
    assert.is(setup.code, 0, setup.stderr);
    ctx.apiKey = JSON.parse(setup.stdout).apiKey;
    ctx.running = [];
  });

  test.after.each(async (ctx) => {
    for (const relay of ctx.running.reverse()) await relay.stop();
    rmSync(ctx.dataDir, { recursive: true, force: true });
  });

  test('a send waits while the projector is behind, and goes ahead once another process has caught it up', async (ctx) => {
    const api = await startApi(ctx, { RELAY_ADMISSION_BACKLOG_GROUPS: 'projector', RELAY_ADMISSION_BACKLOG: '3', RELAY_ADMISSION_MAX_WAIT_MS: '10000' });
    const before = await fillBacklog(ctx, api, 3);

    let answeredAt: number | null = null;
    const held = postEmail(api.url!, ctx.apiKey, message(99)).then((sent) => {
      answeredAt = Date.now();
      return sent;
    });
    await waitUntil(async () => (await metric(api, 'relay_admission_flow_waiting')) === 1, 'the send to be waiting', 10_000);
    assert.ok((await metric(api, 'relay_admission_backlog_records')) > 3, 'the backlog it waits on is over the bound');
    assert.is(answeredAt, null, 'not answered while it waits');

    const projectorStartedAt = Date.now();
    await start(ctx, ['projector']);
    const sent = await held;
    assert.ok(answeredAt! >= projectorStartedAt, 'answered only after the projector started');
    assert.is(await metric(api, 'relay_admission_flow_waits_total', { outcome: 'caught_up' }), 1);
    assert.is(await metric(api, 'relay_admission_flow_waits_total', { outcome: 'timed_out' }), 0);
    assert.is(await metric(api, 'relay_admission_flow_waiting'), 0);

    // Every email, the held one included, is listed by the projector.
    await waitUntil(async () => {
      const list = await (await fetch(`${api.url}/v1/emails?limit=100`, { headers: { authorization: `Bearer ${ctx.apiKey}` } })).json() as { emails: Array<{ id: string }> };
      const listed = new Set(list.emails.map((e) => e.id));
      return [...before, sent.id].every((id) => listed.has(id));
    }, 'every email to be listed', 10_000);
  });

  test('after the longest wait a send goes ahead however far behind the pipeline is: 202, counted, nothing lost', async (ctx) => {
    const api = await startApi(ctx, { RELAY_ADMISSION_BACKLOG_GROUPS: 'projector', RELAY_ADMISSION_BACKLOG: '2', RELAY_ADMISSION_MAX_WAIT_MS: '300' });
    await fillBacklog(ctx, api, 2);
    const began = performance.now();
    const sent = await postEmail(api.url!, ctx.apiKey, message(7));
    assert.ok(performance.now() - began >= 300, 'it waited the longest wait');
    assert.is(await metric(api, 'relay_admission_flow_waits_total', { outcome: 'timed_out' }), 1);
    assert.ok((await metric(api, 'relay_admission_flow_wait_seconds_total')) >= 0.3);
    const detail = await fetch(`${api.url}/v1/emails/${sent.id}`, { headers: { authorization: `Bearer ${ctx.apiKey}` } });
    assert.is(detail.status, 200);
    assert.is(((await detail.json()) as { status: string }).status, 'queued');
  });

  test('replays are answered at once while sends wait', async (ctx) => {
    const api = await startApi(ctx, { RELAY_ADMISSION_BACKLOG_GROUPS: 'projector', RELAY_ADMISSION_BACKLOG: '1', RELAY_ADMISSION_MAX_WAIT_MS: '10000' });
    const send = () => fetch(`${api.url}/v1/emails`, {
      method: 'POST', headers: { authorization: `Bearer ${ctx.apiKey}`, 'content-type': 'application/json', 'idempotency-key': 'flow-replay' }, body: JSON.stringify(message(1)),
    });
    const first = await send();
    assert.is(first.status, 202);
    await fillBacklog(ctx, api, 1);
    const replay = await send();
    assert.is(replay.status, 202);
    assert.equal(await replay.json(), await first.json());
    assert.is(await metric(api, 'relay_admission_flow_waits_total'), 0);
  });

  test('a group name that is not a processor stops the start, naming the variable', async (ctx) => {
    try {
      await startApi(ctx, { RELAY_ADMISSION_BACKLOG_GROUPS: 'projector,mailer' });
      assert.unreachable('started');
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.is((error as ConfigError).variable, 'RELAY_ADMISSION_BACKLOG_GROUPS');
      assert.match((error as Error).message, /"mailer" is not a processor/);
    }
  });

  test.run();
}

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

flowSuite('embedded', () => ({}), ['api']);
flowSuite(
  'kafka',
  () => distributedEnv(brokers!, mongoUrl!),
  ['api', 'forwarder'],
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
