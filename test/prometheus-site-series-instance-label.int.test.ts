// The relay_site_* families (relay_site_rate_per_minute, relay_site_limit_per_minute,
// relay_site_paused_seconds, relay_site_throttles) name the sender instance in `sender_instance`,
// a label Prometheus does not own: `instance` is the one it attaches to every series of a scrape
// target (honor_labels: false, the default, moves an exported `instance` to `exported_instance`),
// and Relay's rules and dashboard read `instance` as the scraped process everywhere. So once
// Prometheus has stored a series, the sender instance /metrics gave is found under the label
// docs/operations.md names, and `instance` is the scraped process.
//
// Real processes: `relay start` (mx delivery to an SMTP sink through a DNS server the test
// runs), scraped by a private Prometheus server; its /api/v1/query answers.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { scrape } from './support/metrics.ts';
import { prometheusMissing, startPrometheus, type PrometheusServer } from './support/prometheus-server.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Ctx { dir: string; dns: TestDnsServer; sink: SmtpSink; relay: RelayProcess; url: string; hostPort: string; apiKey: string; prometheus: PrometheusServer | null }

const test = skippableSuite<Ctx>('relay_site_* series in a real Prometheus', prometheusMissing());

test.before(async (ctx) => {
  ctx.prometheus = null;
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-prom-sites-'));
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: ctx.dir });
  assert.is(setup.code, 0, setup.stderr);
  ctx.apiKey = JSON.parse(setup.stdout).apiKey;
  ctx.sink = await startSmtpSink();
  ctx.dns = await startDnsServer([
    { name: 'example.test', type: 'MX', data: { preference: 10, exchange: 'mx.example.test' } },
    { name: 'mx.example.test', type: 'A', data: '127.0.0.1' },
  ]);
  const port = await freePort();
  ctx.hostPort = `127.0.0.1:${port}`;
  ctx.url = `http://${ctx.hostPort}`;
  ctx.relay = spawnRelay(['start'], {
    RELAY_DATA_DIR: ctx.dir, PORT: String(port),
    RELAY_DELIVERY: 'mx', RELAY_DNS_SERVERS: ctx.dns.address, RELAY_MX_PORT: String(ctx.sink.port), RELAY_MX_ALLOW: '127.0.0.1',
  });
  await waitForReady(ctx.url, ctx.relay, 60_000);
});

test.after(async (ctx) => {
  await ctx.prometheus?.stop();
  await ctx.relay?.kill();
  await ctx.sink?.close();
  await ctx.dns?.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('the sender instance /metrics names in relay_site_* is under the documented `sender_instance` label once Prometheus stores it', async (ctx) => {
  await postEmail(ctx.url, ctx.apiKey, { from: 'hello@example.test', to: 'ann@example.test', subject: 'a site', text: 'hi' });
  await waitUntil(() => ctx.sink.messages.length === 1, 'the MX sink took the message', 30_000);
  // The sender publishes its sites every 5 s: wait for them on the page itself.
  let exposed: Record<string, string> = {};
  await waitUntil(async () => {
    const site = (await scrape(ctx.url)).find((s) => s.name === 'relay_site_limit_per_minute' && s.labels.site !== 'other');
    if (site) exposed = site.labels;
    return site !== undefined;
  }, 'relay_site_limit_per_minute names the recipient site on /metrics', 30_000);
  // The sender instance as the sites' snapshots name it (apps/services/delivery/sites.ts: host:pid).
  const sender = exposed.sender_instance;
  assert.ok(sender !== undefined && sender !== ctx.hostPort, `/metrics names the sender instance in \`sender_instance\`, as the docs say: ${JSON.stringify(exposed)}`);

  ctx.prometheus = await startPrometheus({ targets: [ctx.hostPort] });
  await ctx.prometheus.scraped();
  const prometheus = ctx.prometheus;
  let stored: Array<Record<string, string>> = [];
  await waitUntil(async () => {
    stored = (await prometheus.query(`relay_site_limit_per_minute{site="${exposed.site}"}`)).map((s) => s.metric);
    return stored.length > 0;
  }, 'Prometheus holds the site series', 30_000);

  // What an operator following docs/operations.md writes: the sender instance's series.
  const bySender = await prometheus.query(`relay_site_limit_per_minute{sender_instance="${sender}"}`);
  assert.ok(bySender.length > 0, `no series with sender_instance="${sender}" in Prometheus: it stored ${JSON.stringify(stored)}`);
  assert.equal(stored.map((labels) => [labels.sender_instance, labels.instance, labels.exported_instance]), [[sender, ctx.hostPort, undefined]]);
});

test.run();
