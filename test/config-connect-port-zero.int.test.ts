// Port 0 means "any free port" for a listener, and the shared port() reader allows it; but it is
// also used for ports Relay connects to, where 0 can never be reached: RELAY_MX_PORT=0 (every MX
// connection) and RELAY_MTA_STS_PORT=0 (MTA-STS policy hosts) start Relay, and each connection
// to port 0 then fails (ECONNREFUSED) at the first delivery instead of at start.
// RELAY_WEBHOOK_ALLOW=localhost:0 is accepted the same way (its own check is /:\d{1,5}$/).
// These are test and development settings, but docs/configuration.md promises that a bad value
// stops the start, and RELAY_DNS_SERVERS already refuses port 0 for this reason
// (infra/config.ts:190-193).
//
// Where: infra/config.ts:136-141 (port() accepts 0), used for RELAY_MX_PORT at 453 and
// RELAY_MTA_STS_PORT at 457; RELAY_WEBHOOK_ALLOW at 344.
//
// Expected: exit 78, "relay: invalid configuration: RELAY_MX_PORT: must be a port number from 1
// to 65535, got "0"" (likewise for the other two): ports to connect to are 1-65535.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

for (const [variable, value] of [['RELAY_MX_PORT', '0'], ['RELAY_MTA_STS_PORT', '0'], ['RELAY_WEBHOOK_ALLOW', 'localhost:0']] as const) {
  test(`${variable}=${value} (a port Relay connects to) stops relay api with exit 78 naming the variable`, async () => {
    const result = await startOutcome(['api'], { RELAY_DELIVERY: 'mx', [variable]: value });
    assert.is(result.outcome, 'exited', describeOutcome(result));
    if (result.outcome !== 'exited') return;
    assert.is(result.code, 78, describeOutcome(result));
    assert.match(result.output, new RegExp(`^relay: invalid configuration: ${variable}: `, 'm'), describeOutcome(result));
  });
}

test.run();
