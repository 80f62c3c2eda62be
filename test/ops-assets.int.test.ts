// The operators' assets in ops/: the Prometheus rules pass `promtool check rules` and their
// unit tests (`promtool test rules`, a firing and a quiet case for every alert), and every
// metric the rules and the Grafana dashboard query is one a running Relay exports: its name
// is read from the `# TYPE` lines of a live `relay start`'s /metrics (a histogram's _bucket,
// _sum and _count series count as its own).
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import * as assert from 'uvu/assert';
import { parse as parseYaml } from 'yaml';
import { skippableSuite } from './support/skippable-suite.ts';
import { freePort, spawnRelay, waitForReady } from './support/relay-process.ts';

const run = promisify(execFile);
const OPS = fileURLToPath(new URL('../ops/', import.meta.url));
const RULES = join(OPS, 'prometheus', 'relay-rules.yml');
const RULE_TESTS = join(OPS, 'prometheus', 'relay-rules.test.yml');
const DASHBOARD = join(OPS, 'grafana', 'relay-dashboard.json');

/** Series Prometheus itself makes for every scrape target. */
const PROMETHEUS_OWN = new Set(['up']);

async function promtoolMissing(): Promise<string | undefined> {
  try {
    await run('promtool', ['--version']);
    return undefined;
  } catch {
    return 'promtool is not installed (Debian: apt-get install prometheus; .ci/run installs it)';
  }
}

interface Rule { record?: string; alert?: string; expr: string; for?: string }
const rules = (): Rule[] => (parseYaml(readFileSync(RULES, 'utf8')) as { groups: Array<{ rules: Rule[] }> }).groups.flatMap((g) => g.rules);

/** Every PromQL query of the dashboard: panel targets and template variables. */
function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: Array<{ type: string; targets?: Array<{ expr: string }> }>;
    templating: { list: Array<{ type: string; query: string | { query: string } }> };
  };
  const panels = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr);
  const variables = dashboard.templating.list.filter((v) => v.type === 'query').map((v) => (typeof v.query === 'string' ? v.query : v.query.query));
  return [...panels, ...variables];
}

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects: identifiers that are not functions or
 * aggregations (followed by "("), keywords, label names (inside {…} and the label lists of
 * by/without/on/ignoring/group_*), strings, durations or Grafana variables.
 */
function metricNamesIn(expr: string): string[] {
  let text = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  // label_values(metric, label): the second argument is a label.
  text = text.replace(/\blabel_values\s*\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*\w+\s*\)/g, ' $1 ');
  const names: string[] = [];
  for (const match of text.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const rest = text.slice(match.index! + match[0].length);
    if (/^\s*\(/.test(rest) || KEYWORDS.has(match[0].toLowerCase())) continue;
    if (/^\d/.test(match[0]) || /[0-9.]$/.test(text.slice(0, match.index!)) ) continue; // 5m, 1e3
    names.push(match[0]);
  }
  return names;
}

const test = skippableSuite<{ dir: string; exported: Map<string, string> }>('ops/: alert rules and dashboard', await promtoolMissing());

test.before(async (ctx) => {
  ctx.dir = mkdtempSync(join(tmpdir(), 'relay-ops-'));
  const port = await freePort();
  const relay = spawnRelay(['start'], { RELAY_DATA_DIR: ctx.dir, PORT: String(port) });
  try {
    await waitForReady(`http://127.0.0.1:${port}`, relay, 60_000);
    const page = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    ctx.exported = new Map([...page.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
  } finally {
    await relay.stop();
  }
});

test.after((ctx) => rmSync(ctx.dir, { recursive: true, force: true }));

test('promtool: the rules are valid and every alert\'s unit tests pass', async () => {
  await run('promtool', ['check', 'rules', RULES]);
  const { stdout } = await run('promtool', ['test', 'rules', RULE_TESTS], { cwd: join(OPS, 'prometheus') });
  assert.match(stdout, /SUCCESS/);
});

test('every alert has a case where it fires and one where it stays quiet', () => {
  const tests = (parseYaml(readFileSync(RULE_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }> }).tests
    .flatMap((t) => t.alert_rule_test ?? []);
  for (const { alert } of rules().filter((r) => r.alert)) {
    const cases = tests.filter((t) => t.alertname === alert);
    assert.ok(cases.some((t) => (t.exp_alerts ?? []).length > 0), `${alert}: no case where it fires`);
    assert.ok(cases.some((t) => (t.exp_alerts ?? []).length === 0), `${alert}: no case where it stays quiet`);
  }
});

function unknownNames(ctx: { exported: Map<string, string> }, exprs: string[], recorded: Set<string>): string[] {
  const known = (name: string) => {
    if (PROMETHEUS_OWN.has(name) || recorded.has(name) || ctx.exported.has(name)) return true;
    const histogram = /^(.*)_(bucket|sum|count)$/.exec(name);
    return histogram !== null && ctx.exported.get(histogram[1]) === 'histogram';
  };
  return [...new Set(exprs.flatMap(metricNamesIn))].filter((name) => !known(name));
}

test('the expression reader finds metric names and nothing else', () => {
  assert.equal(metricNamesIn('sum by (group) (max by (group, partition) (relay_consumer_lag{instance=~"$instance"}))'), ['relay_consumer_lag']);
  assert.equal(metricNamesIn('histogram_quantile(0.95, sum by (le, route) (rate(relay_http_request_duration_seconds_bucket[$__rate_interval])))'), ['relay_http_request_duration_seconds_bucket']);
  assert.equal(metricNamesIn('relay_part_work_waiting == 1 and on (instance, part) (time() - relay_part_last_progress_seconds) > 60'), ['relay_part_work_waiting', 'relay_part_last_progress_seconds']);
  assert.equal(metricNamesIn('label_values(process_start_time_seconds, instance)'), ['process_start_time_seconds']);
  assert.equal(metricNamesIn('sum(increase(x_total{kind="a b"}[1d])) or vector(0)'), ['x_total']);
});

test('every metric the rules query is exported by Relay (or recorded by the rules)', (ctx) => {
  const all = rules();
  const recorded = new Set(all.flatMap((r) => (r.record ? [r.record] : [])));
  const exprs = all.map((r) => r.expr);
  assert.ok(exprs.flatMap(metricNamesIn).length > 20, 'the reader found the names');
  assert.equal(unknownNames(ctx, exprs, recorded), []);
});

test('every metric the Grafana dashboard queries is exported by Relay', (ctx) => {
  const queries = dashboardQueries();
  assert.ok(queries.length >= 25, `${queries.length} queries`);
  const names = new Set(queries.flatMap(metricNamesIn));
  assert.ok(names.size >= 20, `${names.size} metric names`);
  assert.equal(unknownNames(ctx, queries, new Set()), []);
  // A dashboard of this Relay: its panels cover every metric the rules watch, so an alert that
  // fires has a panel to look at.
  const recorded = new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));
  const watched = new Set(rules().flatMap((r) => metricNamesIn(r.expr)).filter((name) => !recorded.has(name) && !PROMETHEUS_OWN.has(name)));
  assert.ok(watched.size >= 10, `${watched.size} metrics watched by the rules`);
  assert.equal([...watched].filter((name) => !names.has(name)), [], 'metrics the rules watch and no panel shows');
});

test.run();
