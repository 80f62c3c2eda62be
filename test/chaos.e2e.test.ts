// The chaos run's short form in CI (docs/operations.md, "Chaos"): 300 emails through a
// distributed Relay whose parts are SIGKILLed on a fixed seed's schedule, then every check of
// `npm run chaos` must pass. Skipped without the engines (RELAY_KAFKA_BROKERS, RELAY_MONGODB_URL).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { runChaos } from './chaos/chaos.ts';

const test = suite('chaos: random SIGKILLs of the distributed pipeline lose nothing');

if (!process.env.RELAY_KAFKA_BROKERS || !process.env.RELAY_MONGODB_URL) {
  console.log('skipped: RELAY_KAFKA_BROKERS and RELAY_MONGODB_URL are not set (start them with: eval "$(bash infra/engines/engines.sh up)")');
  test.skip('300 emails, a part killed every ~2.5 s', () => {});
} else {
  test('300 emails, a part killed every ~2.5 s: every check passes', async () => {
    const result = await runChaos({
      emails: 300, ratePerSecond: 8, killIntervalMs: 2500, seed: 12, senderKills: true, drainTimeoutMs: 120_000,
      log: (line) => console.log(line),
    });
    console.log(result.summary);
    const parts = new Set(result.facts.kills.map((k) => k.part));
    assert.ok(result.facts.kills.length >= 12, `${result.facts.kills.length} kills`);
    // This seed's schedule kills every part at least once, the sender three times.
    assert.ok(parts.size >= 8 && parts.has('sender'), `kills of ${[...parts].join(', ')}`);
    for (const check of result.checks) assert.ok(check.ok, `${check.name}: ${check.detail}`);
  });
}

test.run();
