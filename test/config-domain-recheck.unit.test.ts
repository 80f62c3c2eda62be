// RELAY_DOMAIN_RECHECK_INTERVAL_MS and RELAY_DOMAIN_RECHECK_GRACE_MS: their documented
// defaults (6 h, 72 h), their ranges, and a bad value stopping the start naming its variable.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../infra/config.ts';

const test = suite('configuration: the domain re-check');
const HOUR = 3_600_000;

function refused(env: Record<string, string>, variable: string): string {
  try {
    loadConfig(env);
  } catch (error) {
    assert.instance(error, ConfigError);
    assert.is((error as ConfigError).variable, variable);
    return (error as Error).message;
  }
  assert.unreachable(`${JSON.stringify(env)} was accepted`);
  return '';
}

test('unset: each verified domain re-checked every 6 h, failed after 72 h of wrong records', () => {
  assert.equal(loadConfig({}).domainRecheck, { intervalMs: 6 * HOUR, graceMs: 72 * HOUR });
});

test('whole numbers of milliseconds within their ranges are taken', () => {
  assert.equal(loadConfig({ RELAY_DOMAIN_RECHECK_INTERVAL_MS: '60000', RELAY_DOMAIN_RECHECK_GRACE_MS: '3600000' }).domainRecheck, { intervalMs: 60_000, graceMs: HOUR });
  assert.equal(loadConfig({ RELAY_DOMAIN_RECHECK_INTERVAL_MS: '604800000', RELAY_DOMAIN_RECHECK_GRACE_MS: '2592000000' }).domainRecheck, { intervalMs: 7 * 24 * HOUR, graceMs: 30 * 24 * HOUR });
});

test('a value outside its range, with a unit, or not a whole number is refused naming the variable and the range', () => {
  for (const value of ['59999', '604800001', '6h', '1.5e7', '-1', 'off']) {
    assert.match(refused({ RELAY_DOMAIN_RECHECK_INTERVAL_MS: value }, 'RELAY_DOMAIN_RECHECK_INTERVAL_MS'), /from 60000 to 604800000/);
  }
  for (const value of ['3599999', '2592000001', '72h', '0']) {
    assert.match(refused({ RELAY_DOMAIN_RECHECK_GRACE_MS: value }, 'RELAY_DOMAIN_RECHECK_GRACE_MS'), /from 3600000 to 2592000000/);
  }
});

test.run();
