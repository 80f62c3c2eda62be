// Consumer lag on /metrics, scraped over HTTP: the projector runs as its own process
// (`relay processor projector`); while it is stopped, emails admitted meanwhile make its
// group's lag rise on the API's /metrics (any process reports every processor's group), and
// after it restarts the lag falls back to 0. The projector logs joining, its partitions and
// leaving at info. Embedded (sqlite log), and on Kafka + a MongoDB-wire store when configured.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { eventsTopic, groupOf, EVENTS_TOPIC_PARTITIONS } from '../apps/pipeline/topics.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { deliveryTenant, type DeliveryTenant } from './support/delivery.ts';
import { distributedEnv } from './support/delivery-smtp-suite.ts';
import { waitUntil } from './support/eventually.ts';
import { scrape, samplesOf, sumOf, type Sample } from './support/metrics.ts';
import { freePort, postEmail, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Context {
  dataDir: string;
  env: Record<string, string>;
  t: TestApp;
  tenant: DeliveryTenant;
  projectors: RelayProcess[];
}

const brokers = process.env.RELAY_KAFKA_BROKERS;
const mongoUrl = process.env.RELAY_MONGODB_URL;

function lagSuite(mode: string, storesEnv: () => Record<string, string>, skipReason?: string): void {
  const test = skippableSuite<Context>(`consumer lag on /metrics [${mode}]`, skipReason);
  const timeoutMs = 60_000;

  test.before(async (ctx) => {
    ctx.dataDir = mkdtempSync(join(tmpdir(), 'relay-lag-'));
    ctx.projectors = [];
    ctx.env = { RELAY_DATA_DIR: ctx.dataDir, ...storesEnv() };
    // The API and the forwarder in this process; no processor: the projector runs on its own.
    ctx.t = await startTestApp(ctx.env, { dataDir: ctx.dataDir, processors: [], listen: true });
    try {
      ctx.tenant = await deliveryTenant(ctx.t);
    } catch (error) {
      // uvu runs no after hook when before fails: an open app would keep the file running.
      await ctx.t.close();
      throw error;
    }
  });

  test.after(async (ctx) => {
    for (const projector of ctx.projectors) await projector.kill();
    await ctx.t?.close();
    rmSync(ctx.dataDir, { recursive: true, force: true });
  });

  async function startProjector(ctx: Context): Promise<{ process: RelayProcess; url: string }> {
    const port = await freePort();
    const process = spawnRelay(['processor', 'projector'], { ...ctx.env, PORT: String(port), RELAY_LOG_LEVEL: 'info' });
    ctx.projectors.push(process);
    const url = `http://127.0.0.1:${port}`;
    await waitForReady(url, process, timeoutMs);
    return { process, url };
  }

  test('the projector group’s lag rises while the projector is stopped and falls to 0 after it restarts', async (ctx) => {
    const group = groupOf(ctx.t.config.logNamespace, 'projector');
    const topic = eventsTopic(ctx.t.config.logNamespace);
    const api = ctx.t.url!;
    const lagOf = (samples: Sample[]) => sumOf(samples, 'relay_consumer_lag', { group, topic });
    const committedOf = (samples: Sample[]) => sumOf(samples, 'relay_consumer_committed_offset', { group, topic });
    const send = (subject: string) => postEmail(api, ctx.tenant.key, { from: `hello@${ctx.tenant.domain}`, to: 'ann@example.org', subject, text: subject });

    const first = await startProjector(ctx);
    for (let i = 0; i < 3; i++) await send(`while running ${i}`);
    await waitUntil(async () => {
      const samples = await scrape(api);
      return committedOf(samples) >= 3 && lagOf(samples) === 0;
    }, 'the running projector keeps its lag at 0', timeoutMs);
    const caughtUp = await scrape(api);
    assert.is(samplesOf(caughtUp, 'relay_consumer_lag', { group, topic }).length, EVENTS_TOPIC_PARTITIONS, 'one lag series per partition');
    assert.is(samplesOf(caughtUp, 'relay_metrics_collector_up', { collector: 'log_offsets' })[0]?.value, 1);

    assert.is((await first.process.stop()).code, 0);
    const committedWhileStopped = committedOf(await scrape(api));
    for (let i = 0; i < 4; i++) await send(`while stopped ${i}`);
    // The forwarder publishes them; nobody in the projector group handles them.
    await waitUntil(async () => lagOf(await scrape(api)) >= 4, 'the lag reaches the 4 emails admitted meanwhile', timeoutMs);
    const lagAfterFour = lagOf(await scrape(api));
    for (let i = 0; i < 3; i++) await send(`still stopped ${i}`);
    await waitUntil(async () => lagOf(await scrape(api)) >= lagAfterFour + 3, 'the lag rises with 3 more', timeoutMs);
    assert.is(committedOf(await scrape(api)), committedWhileStopped, 'nothing is committed while the projector is stopped');

    const second = await startProjector(ctx);
    await waitUntil(async () => lagOf(await scrape(api)) === 0, 'the restarted projector brings the lag back to 0', timeoutMs);
    assert.ok(committedOf(await scrape(api)) >= committedWhileStopped + 7, 'the group committed past every email admitted while it was stopped');
    // The projector's own process serves /metrics too (with the same view of its group).
    const own = await scrape(second.url);
    assert.is(lagOf(own), 0);
    assert.ok(sumOf(own, 'relay_http_requests_total', { route: '/readyz', status: '200' }) >= 1, 'its own HTTP requests are counted');

    // Membership changes at info: joined, partitions, left (the first process stopped with SIGTERM).
    const log = first.process.output();
    assert.match(log, `joined consumer group ${group}`);
    assert.match(log, /assigned partitions 0, 1, 2, 3, 4, 5, 6, 7/);
    assert.match(log, `left consumer group ${group}`);
    for (const line of log.split('\n').filter((l) => l.startsWith('{') && l.includes('consumer group'))) assert.is(JSON.parse(line).level, 30, `logged at info: ${line}`);
  });

  test.run();
}

lagSuite('embedded', () => ({}));
lagSuite(
  'kafka',
  () => distributedEnv(brokers!, mongoUrl!),
  brokers && mongoUrl ? undefined : 'RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")',
);
