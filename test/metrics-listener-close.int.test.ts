// The metrics listener of its own (RELAY_METRICS_PORT) closes at once on a stop, whatever its
// clients hold open: a connection that has sent nothing yet is not idle to Node, and closing only
// the idle ones left the stop waiting for its header timeout (a minute), past the stop's deadline.
import { connect } from 'node:net';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRelayMetrics, listenForMetrics } from '../apps/relay-metrics.ts';

const test = suite('the metrics listener closing');

test('a connection that has sent nothing does not hold the close', async () => {
  const listener = await listenForMetrics(createRelayMetrics(undefined, { process: false }), '127.0.0.1', 0);
  const { port } = new URL(listener.url);
  const silent = connect(Number(port), '127.0.0.1');
  await new Promise<void>((resolve) => silent.once('connect', () => resolve()));
  const ended = new Promise<void>((resolve) => silent.once('close', () => resolve()));
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    listener.close().then(() => 'closed'),
    new Promise<string>((resolve) => (timer = setTimeout(() => resolve('still open after 10 s'), 10_000))),
  ]).finally(() => clearTimeout(timer));
  silent.destroy();
  assert.is(outcome, 'closed');
  await ended;
});

test.run();
