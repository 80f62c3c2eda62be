// RELAY_METRICS_HOST is "the address the RELAY_METRICS_PORT listener binds, e.g. one only the
// monitoring network reaches" (docs/configuration.md). Set without RELAY_METRICS_PORT it is
// silently ignored: Relay starts, there is no metrics listener on that address, and /metrics is
// still answered on HOST:PORT, the address clients reach. An operator who set it to keep the
// metrics off the public address gets them on the public address, and is not told.
//
// Where: infra/config.ts:429-434 and 473 (metrics.host is taken from RELAY_METRICS_HOST whether
// or not RELAY_METRICS_PORT is set; without the port it is never used).
//
// Expected: exit 78 with "relay: invalid configuration: RELAY_METRICS_HOST: …" saying it only
// takes effect with RELAY_METRICS_PORT (a port, or leave RELAY_METRICS_HOST unset), as
// RELAY_INBOUND_TLS_CERT without RELAY_INBOUND_TLS_KEY is refused.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

test('relay api with RELAY_METRICS_HOST but no RELAY_METRICS_PORT exits 78 naming RELAY_METRICS_HOST', async () => {
  // HOST is where clients connect; 127.0.0.2 (loopback too) stands for the monitoring network.
  const result = await startOutcome(['api'], { HOST: '127.0.0.1', RELAY_METRICS_HOST: '127.0.0.2' }, async (url) => {
    const response = await fetch(`${url}/metrics`);
    await response.body?.cancel();
    return `GET ${url}/metrics answered ${response.status}`;
  });
  assert.is(result.outcome, 'exited', describeOutcome(result));
  if (result.outcome !== 'exited') return;
  assert.is(result.code, 78, describeOutcome(result));
  assert.match(result.output, /^relay: invalid configuration: RELAY_METRICS_HOST: .*RELAY_METRICS_PORT/m, describeOutcome(result));
});

test.run();
