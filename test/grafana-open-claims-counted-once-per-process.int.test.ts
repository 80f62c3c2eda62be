// The Grafana dashboard's "Open delivery claims" panel (ops/grafana/relay-dashboard.json) shows
// the deployment's open claims, the number each process's own /metrics gives, however many
// processes are scraped: relay_delivery_open_claims is read from the sender's schedule in the
// shared store at each scrape by any process (docs/operations.md, Monitoring), so the panel takes
// the max across instances, as the lag panels do, never a sum that would count one email held in
// an SMTP transaction once per process.
//
// Real processes: `relay start` and a second process on the same embedded data directory
// (`relay api`, as a scaled-out API would run), a smarthost (SMTP sink) that holds the message's
// DATA unanswered so its claim stays open, a private Prometheus server scraping both processes,
// and the panel's query evaluated through Prometheus's /api/v1/query.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as assert from 'uvu/assert';
import { waitUntil } from './support/eventually.ts';
import { scrape, sumOf } from './support/metrics.ts';
import { DASHBOARD, prometheusMissing, startPrometheus, type PrometheusServer } from './support/prometheus-server.ts';
import { freePort, postEmail, runRelay, spawnRelay, waitForReady, type RelayProcess } from './support/relay-process.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { startSmtpSink, type SmtpSink } from './support/smtp-sink.ts';

interface Ctx { dir: string; sink: SmtpSink; release: () => void; dataSeen: number; processes: RelayProcess[]; prometheus: PrometheusServer | null }

const test = skippableSuite<Ctx>('the dashboard\'s open delivery claims with two processes scraped', prometheusMissing());

/** The dashboard panel's queries, with Grafana's variables as "All" gives them. */
function panelQueries(title: string): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
  const panel = dashboard.panels.find((p) => p.title === title);
  assert.ok(panel?.targets, `the dashboard has a panel "${title}"`);
  return panel.targets.map((t) => t.expr.replaceAll('$instance', '.*').replaceAll('$__rate_interval', '1m'));
}

test.before(async (ctx) => {
  ctx.processes = [];
  ctx.prometheus = null;
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-prom-claims-'));
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  ctx.release = release;
  // The smarthost takes the message and does not answer its end of data until the test ends.
  ctx.dataSeen = 0;
  ctx.sink = await startSmtpSink({ onData: async () => { ctx.dataSeen++; await held; return {}; } });
});

test.after(async (ctx) => {
  await ctx.prometheus?.stop();
  for (const p of ctx.processes) await p.kill();
  ctx.release();
  await ctx.sink?.close();
  rmSync(ctx.dir, { recursive: true, force: true });
});

test('one email held in its SMTP transaction: the panel shows 1 open claim, as each process\'s /metrics does', async (ctx) => {
  const setup = await runRelay(['setup', '--json', '--trust-domain', '--email', 'ops@example.test', '--password', 'a long enough password', '--domain', 'example.test'], { RELAY_DATA_DIR: ctx.dir });
  assert.is(setup.code, 0, setup.stderr);
  const apiKey = JSON.parse(setup.stdout).apiKey as string;
  const env = { RELAY_DATA_DIR: ctx.dir, RELAY_SMTP_URL: `smtp://127.0.0.1:${ctx.sink.port}?tls=none` };
  const hostPorts: string[] = [];
  for (const command of [['start'], ['api']]) {
    const port = await freePort();
    const process = spawnRelay(command, { ...env, PORT: String(port) });
    ctx.processes.push(process);
    await waitForReady(`http://127.0.0.1:${port}`, process, 60_000);
    hostPorts.push(`127.0.0.1:${port}`);
  }

  await postEmail(`http://${hostPorts[1]}`, apiKey, { from: 'hello@example.test', to: 'ann@example.test', subject: 'held', text: 'held' });
  await waitUntil(() => ctx.dataSeen === 1, 'the smarthost has the message (its DATA unanswered)', 30_000);
  for (const hostPort of hostPorts) {
    await waitUntil(async () => sumOf(await scrape(`http://${hostPort}`), 'relay_delivery_open_claims') === 1, `${hostPort}/metrics shows the 1 open claim`, 20_000);
  }

  ctx.prometheus = await startPrometheus({ targets: hostPorts });
  await ctx.prometheus.scraped();
  const prometheus = ctx.prometheus;
  // Both processes' series are in Prometheus (each says 1).
  await waitUntil(async () => (await prometheus.query('relay_delivery_open_claims == 1')).length === 2, 'Prometheus holds both processes\' relay_delivery_open_claims', 30_000);

  const [openClaims, oldestAge] = panelQueries('Open delivery claims');
  // Its neighbour, read from the same schedule by any process, is taken right: a max.
  assert.match(oldestAge, /^max\(/, 'the oldest claim\'s age is a max across processes');
  const shown = await prometheus.query(openClaims);
  assert.is(shown.length, 1, `${openClaims}: ${JSON.stringify(shown)}`);
  assert.is(Number(shown[0].value[1]), 1,
    `the "Open delivery claims" panel (${openClaims}) shows ${shown[0].value[1]} open claims while there is 1 (each of the 2 scraped processes reports the deployment's count)`);
});

test.run();
