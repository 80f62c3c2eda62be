// One forwarder behind is one RelayForwarderLagGrowing alert (ops/prometheus/relay-rules.yml),
// however many processes report its lag: relay_forwarder_lag is the deployment's one forwarder's
// lag, read at each scrape by every process (docs/operations.md, Monitoring), so the rule
// aggregates across instances (max) before it asks whether the lag grows, as the consumer-lag
// rules and the dashboard's "Forwarder lag" panel do, rather than paging once per process, each
// alert naming an innocent `instance`.
//
// Real processes: two `relay api` processes on an embedded data directory of the older layout
// that keeps a log.db of its own (test/fixtures/upgrade-c0b790a: there the forwarder copies
// events into log.db, so its lag is real), no forwarder running, sends through the API so the
// lag grows; a private Prometheus server scraping both with the shipped rules (each alert's
// `for:` shortened to 2 s), and its /api/v1/alerts.
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { scrape, sumOf } from './support/metrics.ts';
import { prometheusMissing, startPrometheus, type PromAlert, type PrometheusServer } from './support/prometheus-server.ts';
import { freePort, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { fixtureJson, postSend, restoreFixture, type RecordedRequests, type RestoredFixture } from './support/upgrade-fixtures.ts';

const FIXTURE = 'upgrade-c0b790a';

interface Ctx { fixture: RestoredFixture; processes: RelayProcess[]; prometheus: PrometheusServer | null }

const test = skippableSuite<Ctx>('RelayForwarderLagGrowing with two processes scraped', prometheusMissing());

test.before((ctx) => {
  ctx.processes = [];
  ctx.prometheus = null;
  ctx.fixture = restoreFixture(FIXTURE);
});

test.after(async (ctx) => {
  await ctx.prometheus?.stop();
  for (const p of ctx.processes) await p.kill();
  ctx.fixture?.remove();
});

test('one forwarder falling behind fires one RelayForwarderLagGrowing, not one per process that reports its lag', async (ctx) => {
  const { apiKey } = fixtureJson<RecordedRequests>(FIXTURE, 'requests.json');
  const hostPorts: string[] = [];
  // One after the other: the first start after the upgrade fills what the newer version keeps.
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    const api = spawnRelay(['api'], { RELAY_DATA_DIR: ctx.fixture.dataDir, PORT: String(port) });
    ctx.processes.push(api);
    await waitForReady(`http://127.0.0.1:${port}`, api, 60_000);
    hostPorts.push(`127.0.0.1:${port}`);
  }
  ctx.prometheus = await startPrometheus({ targets: hostPorts });
  await ctx.prometheus.scraped();
  const prometheus = ctx.prometheus;

  const forwarderAlerts = async (): Promise<PromAlert[]> => (await prometheus.alerts()).filter((a) => a.labels.alertname === 'RelayForwarderLagGrowing');
  let sent = 0;
  const send = async () => {
    const { status, body } = await postSend(`http://${hostPorts[sent % 2]}`, apiKey,
      { from: 'Acme <hello@example.com>', to: `reader${sent}@example.org`, subject: `lag ${sent}`, text: 'behind' });
    assert.is(status, 202, JSON.stringify(body));
    sent++;
  };
  // Sends go on (the lag grows) until the alert's condition has held on both pages for well over
  // its shortened `for:`, and the alert fires.
  const condition = 'relay_forwarder_lag > 0 and deriv(relay_forwarder_lag[5m]) > 0';
  let bothSince: number | null = null;
  await waitUntil(async () => {
    await send();
    const holding = (await prometheus.query(condition)).length;
    if (holding < 2) bothSince = null;
    else bothSince ??= Date.now();
    return bothSince !== null && Date.now() - bothSince > 8_000 && (await forwarderAlerts()).some((a) => a.state === 'firing');
  }, 'RelayForwarderLagGrowing\'s condition holds on both processes\' pages and the alert fires', 120_000);
  for (const hostPort of hostPorts) {
    assert.ok(sumOf(await scrape(`http://${hostPort}`), 'relay_forwarder_lag') > 0, `${hostPort} reports the forwarder's lag`);
  }

  const firing = (await forwarderAlerts()).filter((a) => a.state === 'firing');
  assert.is(firing.length, 1,
    `one forwarder behind fired ${firing.length} RelayForwarderLagGrowing alerts: ${JSON.stringify(firing.map((a) => a.labels))}`);
});

test.run();
