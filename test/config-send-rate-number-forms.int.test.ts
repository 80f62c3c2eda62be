// RELAY_SEND_RATE is "a whole number of messages per second from 1 to 100000" (the refusal's own
// words), but it is read with Number(): "0x10" is taken as 16 messages per second, "0b11" as 3,
// "1e3" as 1000, and `relay api` starts. Every other whole-number variable (PORT, the _MS
// durations, RELAY_COMPOSE_THREADS, RELAY_ADMISSION_BACKLOG, …) is checked against /^\d+$/
// first and refuses these forms, as `relay events --limit 1e3` does.
//
// Where: infra/config.ts:380-384 (sendRate = Number(rateRaw), then Number.isInteger).
//
// Expected: like its neighbours, exit 78 with "relay: invalid configuration: RELAY_SEND_RATE:
// must be a whole number of messages per second from 1 to 100000, got "0x10"" (test the text
// with /^\d+$/ before Number()). The same Number() reading takes "0x1" for the test-only
// factors RELAY_DELIVERY_RETRY_SCALE and RELAY_WEBHOOK_RETRY_SCALE (infra/config.ts:341, 378).
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { describeOutcome, startOutcome } from './support/start-outcome.ts';

for (const [value, readAs] of [['0x10', 16], ['0b11', 3], ['1e3', 1000]] as const) {
  test(`RELAY_SEND_RATE=${value} (which Number() reads as ${readAs}) stops relay api with exit 78 naming the variable`, async () => {
    const result = await startOutcome(['api'], { RELAY_SEND_RATE: value });
    assert.is(result.outcome, 'exited', `RELAY_SEND_RATE=${value} was taken as ${readAs}: ${describeOutcome(result)}`);
    if (result.outcome !== 'exited') return;
    assert.is(result.code, 78, describeOutcome(result));
    assert.match(result.output, /^relay: invalid configuration: RELAY_SEND_RATE: must be a whole number of messages per second/m, describeOutcome(result));
  });
}

test.run();
