// Shows that /metrics of `relay start` keeps the pipeline thread's counters when the thread
// answers late (apps/relay-metrics.ts, include). The page adds in the thread's registry
// (apps/relay.ts: metrics.include(() => thread.metrics())); a thread that does not answer
// within 1.5 s (apps/pipeline/pipeline-thread.ts, ANSWER_TIMEOUT_MS: one long synchronous
// statement is enough) is shown as it last answered, so a counter never goes down between two
// scrapes (Prometheus would read a reset, and increase()/rate() would count its whole value
// again), and relay_metrics_collector_up{collector="pipeline_thread"} is 0 for that scrape.
import { tmpdir } from 'node:os';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { startPipelineThread } from '../apps/pipeline/pipeline-thread.ts';
import { createRelayMetrics } from '../apps/relay-metrics.ts';
import { loadConfig } from '../infra/config.ts';
import { parseMetrics, samplesOf, sumOf } from './support/metrics.ts';

const test = suite('/metrics while the pipeline thread is slow to answer');
const SLOW = new URL('./fixtures/slow-metrics-thread.ts', import.meta.url);

test('a counter the page showed never goes down on the next scrape, and the late answer shows as the thread\'s collector down', async () => {
  const config = loadConfig({ RELAY_DATA_DIR: tmpdir() });
  // Wired as startRelay wires the main thread's registry and the thread's.
  const metrics = createRelayMetrics(undefined, { process: true });
  const thread = await startPipelineThread({ config, parts: ['retention'] }, { onExit: () => {} }, SLOW);
  metrics.include(() => thread.metrics());
  const scrape = async () => {
    const page = parseMetrics(await metrics.render());
    return {
      runs: sumOf(page, 'relay_retention_runs_total', { result: 'ok' }),
      up: samplesOf(page, 'relay_metrics_collector_up', { collector: 'pipeline_thread' }).map((s) => s.value),
    };
  };
  try {
    const first = await scrape();
    assert.is(first.runs, 3, 'the thread\'s three passes are on the page');
    // The fixture answers this one after 2 s.
    const late = await scrape();
    assert.is(late.runs, 3, `relay_retention_runs_total{result="ok"} went from 3 to ${late.runs} between two scrapes (a counter reset to Prometheus)`);
    const again = await scrape();
    assert.is(again.runs, 3);
    assert.equal([first.up, late.up, again.up], [[1], [0], [1]], 'the late scrape shows the thread\'s collector down, the others up');
  } finally {
    await thread.stop();
  }
});

test.run();
