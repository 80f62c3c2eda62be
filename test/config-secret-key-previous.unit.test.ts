// docs/configuration.md: "a comma-separated variable that is set must list at least one item".
// RELAY_SECRET_KEY_PREVIOUS set to "," or " , " (a rotation written as "$OLD1,$OLD2" with both
// variables empty) must stop the start, not run without the old keys: the DKIM keys they sealed
// would fail as message_unbuildable.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../infra/config.ts';

test('RELAY_SECRET_KEY_PREVIOUS set to a list of nothing is refused, as other comma-separated variables are', () => {
  for (const value of [',', ' , ']) {
    let error: unknown = null;
    try {
      loadConfig({ RELAY_DATA_DIR: '/nonexistent-relay-dir', RELAY_SECRET_KEY_PREVIOUS: value }, false);
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof ConfigError, `RELAY_SECRET_KEY_PREVIOUS=${JSON.stringify(value)} was accepted`);
    assert.is((error as ConfigError).variable, 'RELAY_SECRET_KEY_PREVIOUS');
  }
});

test('control: RELAY_KAFKA_BROKERS="," is refused', () => {
  assert.throws(() => loadConfig({ RELAY_DATA_DIR: '/nonexistent-relay-dir', RELAY_KAFKA_BROKERS: ',' }, false), (e: unknown) => e instanceof ConfigError);
});

test.run();
