// The metrics registry (infra/metrics/registry.ts) writes the Prometheus text exposition
// format: HELP and TYPE lines, escaped label values and help text, cumulative histogram
// buckets ending in +Inf with _sum and _count, collectors run before each rendering.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { MetricsRegistry, escapeLabelValue, formatValue } from '../infra/metrics/registry.ts';

const test = suite('metrics registry: Prometheus text format');

/** The page's lines, without the final empty one. */
const linesOf = (page: string) => {
  assert.ok(page.endsWith('\n'), 'the page ends with a line feed');
  return page.slice(0, -1).split('\n');
};

test('a counter: HELP and TYPE lines, one sample per label set in first-use order', async () => {
  const registry = new MetricsRegistry();
  const requests = registry.counter('app_requests_total', 'Requests answered.', ['method', 'status']);
  requests.labels('GET', '200').inc();
  requests.labels('POST', '202').inc(2);
  requests.labels('GET', '200').inc();
  assert.equal(linesOf(await registry.render()), [
    '# HELP app_requests_total Requests answered.',
    '# TYPE app_requests_total counter',
    'app_requests_total{method="GET",status="200"} 2',
    'app_requests_total{method="POST",status="202"} 2',
  ]);
});

test('label values escape backslash, double quote and line feed; help text escapes backslash and line feed', async () => {
  const registry = new MetricsRegistry();
  const gauge = registry.gauge('odd_values', 'A "help" with a \\ and\na second line.', ['v']);
  gauge.labels('a\\b "quoted"\nnext').set(1);
  assert.equal(linesOf(await registry.render()), [
    '# HELP odd_values A "help" with a \\\\ and\\na second line.',
    '# TYPE odd_values gauge',
    'odd_values{v="a\\\\b \\"quoted\\"\\nnext"} 1',
  ]);
  assert.is(escapeLabelValue('\\"\n'), '\\\\\\"\\n');
});

test('an empty label value is left out (Prometheus reads it as absent); a metric without labels has no braces', async () => {
  const registry = new MetricsRegistry();
  const outcomes = registry.counter('outcomes_total', 'Outcomes.', ['result', 'code']);
  outcomes.labels('accepted', '').inc();
  outcomes.labels('rejected', 'quota_exceeded').inc();
  registry.gauge('plain', 'No labels.').labels().set(-2.5);
  assert.equal(linesOf(await registry.render()).filter((l) => !l.startsWith('#')), [
    'outcomes_total{result="accepted"} 1',
    'outcomes_total{result="rejected",code="quota_exceeded"} 1',
    'plain -2.5',
  ]);
});

test('a histogram: cumulative buckets with le (the label last), +Inf equal to _count, _sum of the observations', async () => {
  const registry = new MetricsRegistry();
  const latency = registry.histogram('latency_seconds', 'Latency.', ['route'], [0.1, 0.5, 1]);
  const child = latency.labels('/v1/emails');
  for (const seconds of [0.05, 0.1, 0.3, 0.7, 2, 0.1]) child.observe(seconds);
  latency.labels('/healthz');
  assert.equal(linesOf(await registry.render()), [
    '# HELP latency_seconds Latency.',
    '# TYPE latency_seconds histogram',
    // A value equal to a bound falls in that bucket (le: less than or equal).
    'latency_seconds_bucket{route="/v1/emails",le="0.1"} 3',
    'latency_seconds_bucket{route="/v1/emails",le="0.5"} 4',
    'latency_seconds_bucket{route="/v1/emails",le="1"} 5',
    'latency_seconds_bucket{route="/v1/emails",le="+Inf"} 6',
    'latency_seconds_sum{route="/v1/emails"} 3.25',
    'latency_seconds_count{route="/v1/emails"} 6',
    'latency_seconds_bucket{route="/healthz",le="0.1"} 0',
    'latency_seconds_bucket{route="/healthz",le="0.5"} 0',
    'latency_seconds_bucket{route="/healthz",le="1"} 0',
    'latency_seconds_bucket{route="/healthz",le="+Inf"} 0',
    'latency_seconds_sum{route="/healthz"} 0',
    'latency_seconds_count{route="/healthz"} 0',
  ]);
});

test('a histogram without labels writes only le', async () => {
  const registry = new MetricsRegistry();
  registry.histogram('sizes', 'Sizes.', [], [10]).labels().observe(11);
  assert.equal(linesOf(await registry.render()).filter((l) => !l.startsWith('#')), [
    'sizes_bucket{le="10"} 0',
    'sizes_bucket{le="+Inf"} 1',
    'sizes_sum 11',
    'sizes_count 1',
  ]);
});

test('special values: +Inf, -Inf, NaN', () => {
  assert.is(formatValue(Infinity), '+Inf');
  assert.is(formatValue(-Infinity), '-Inf');
  assert.is(formatValue(NaN), 'NaN');
  assert.is(formatValue(1e21), '1e+21');
});

test('collectors run before each rendering; reset drops label sets no longer read', async () => {
  const registry = new MetricsRegistry();
  const lag = registry.gauge('lag', 'Lag.', ['partition']);
  let read: Record<string, number> = { 0: 3, 1: 0 };
  registry.collect(async () => {
    lag.reset();
    for (const [partition, value] of Object.entries(read)) lag.labels(partition).set(value);
  });
  assert.equal(linesOf(await registry.render()).slice(2), ['lag{partition="0"} 3', 'lag{partition="1"} 0']);
  read = { 1: 7 };
  assert.equal(linesOf(await registry.render()).slice(2), ['lag{partition="1"} 7']);
});

test('families with no sample yet still say what they are; names and labels are checked', async () => {
  const registry = new MetricsRegistry();
  registry.counter('nothing_yet_total', 'Not counted yet.', ['kind']);
  assert.equal(linesOf(await registry.render()), ['# HELP nothing_yet_total Not counted yet.', '# TYPE nothing_yet_total counter']);
  assert.throws(() => registry.counter('nothing_yet_total', 'again'), /collides/);
  assert.throws(() => registry.histogram('h', 'h', [], [1]) && registry.counter('h_count', 'clash'), /collides/);
  assert.throws(() => registry.counter('bad-name', 'x'), /not a valid metric name/);
  assert.throws(() => registry.counter('ok_total', 'x', ['bad-label']), /not a valid label name/);
  assert.throws(() => registry.histogram('h2', 'x', ['le']), /le/);
  assert.throws(() => registry.histogram('h3', 'x', [], [1, 1]), /increasing/);
  const twoLabels = registry.counter('two_total', 'x', ['a', 'b']);
  assert.throws(() => twoLabels.labels('only one'), /takes 2 label values/);
  assert.throws(() => twoLabels.labels('a', 'b').inc(-1), /only goes up/);
});

test('another registry\'s snapshot is rendered with this one: counters and histograms add up, label sets of one side alone are shown as they are', async () => {
  const families = (registry: MetricsRegistry) => ({
    runs: registry.counter('app_runs_total', 'Runs.', ['result']),
    up: registry.gauge('app_up', 'Up.', ['part']),
    seconds: registry.histogram('app_seconds', 'Seconds.', [], [1, 2]),
  });
  const main = new MetricsRegistry();
  const thread = new MetricsRegistry();
  const here = families(main);
  const there = families(thread);
  here.runs.labels('ok').inc(2);
  there.runs.labels('ok').inc(3);
  there.runs.labels('failed').inc();
  there.up.labels('retention').set(1);
  here.seconds.labels().observe(0.5);
  there.seconds.labels().observe(1.5);
  there.seconds.labels().observe(5);
  const snapshot = JSON.parse(JSON.stringify(thread.snapshot()));
  assert.equal(linesOf(await main.render([snapshot])), [
    '# HELP app_runs_total Runs.', '# TYPE app_runs_total counter',
    'app_runs_total{result="ok"} 5', 'app_runs_total{result="failed"} 1',
    '# HELP app_up Up.', '# TYPE app_up gauge',
    'app_up{part="retention"} 1',
    '# HELP app_seconds Seconds.', '# TYPE app_seconds histogram',
    'app_seconds_bucket{le="1"} 1', 'app_seconds_bucket{le="2"} 2', 'app_seconds_bucket{le="+Inf"} 3', 'app_seconds_sum 7', 'app_seconds_count 3',
  ]);
  assert.equal(linesOf(await main.render()).filter((l) => l.startsWith('app_runs_total')), ['app_runs_total{result="ok"} 2'], 'this registry itself is unchanged');
});

test.run();
