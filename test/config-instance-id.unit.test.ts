// RELAY_INSTANCE_ID (an instance's name, the same across its restarts: in its Kafka client id, by
// which a restarted instance recognises its crashed predecessor in a consumer group) and
// RELAY_KAFKA_SESSION_TIMEOUT_MS: their defaults, the forms they take, and a bad value stopping
// the start naming its variable.
import { hostname } from 'node:os';
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { defaultInstanceName } from '../infra/kafka/instance-name.ts';

const test = suite('configuration: the instance name and the Kafka session timeout');

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

test('unset: the host name, and a 10 s session', () => {
  const config = loadConfig({});
  assert.is(config.instanceId, defaultInstanceName(hostname()));
  assert.is(config.kafkaSessionTimeoutMs, 10_000);
  // Empty counts as unset, as for every variable.
  assert.is(loadConfig({ RELAY_INSTANCE_ID: '  ', RELAY_KAFKA_SESSION_TIMEOUT_MS: '' }).instanceId, config.instanceId);
});

test('RELAY_INSTANCE_ID: pod, host and systemd-instance names are taken as written (trimmed)', () => {
  for (const name of ['projector-0', 'relay-projector-7d9f8c6b5-x2k4q', 'mail1.example.net', 'relay-projector@2', 'A_1', 'x', 'a'.repeat(128)]) {
    assert.is(loadConfig({ RELAY_INSTANCE_ID: name }).instanceId, name);
  }
  assert.is(loadConfig({ RELAY_INSTANCE_ID: ' projector-1 ' }).instanceId, 'projector-1');
});

test('RELAY_INSTANCE_ID: a separator of the client id, spaces, other characters, a leading symbol or more than 128 characters are refused naming the rule', () => {
  for (const name of ['relay/projector', 'two words', 'projecteur-é', '-projector', '.projector', 'a'.repeat(129), 'p:1']) {
    const message = refused({ RELAY_INSTANCE_ID: name }, 'RELAY_INSTANCE_ID');
    assert.match(message, '1 to 128 letters, digits, ".", "_", "@" and "-", starting with a letter or digit');
    assert.match(message, `got "${name}"`);
  }
});

test('the host name as the default: characters a name may not hold become "-", a leading symbol goes', () => {
  assert.is(defaultInstanceName('relay-7f9c'), 'relay-7f9c');
  assert.is(defaultInstanceName('my host/1'), 'my-host-1');
  assert.is(defaultInstanceName('-x'), 'x');
  assert.is(defaultInstanceName(''), 'relay');
  assert.is(defaultInstanceName('h'.repeat(300)).length, 128);
  // Whatever the host is called, the default is a name RELAY_INSTANCE_ID would take.
  for (const host of ['my host/1', 'ünï', 'h'.repeat(300), hostname()]) {
    assert.is(loadConfig({ RELAY_INSTANCE_ID: defaultInstanceName(host) }).instanceId, defaultInstanceName(host));
  }
});

test('RELAY_KAFKA_SESSION_TIMEOUT_MS: whole milliseconds from 6000 (the broker\'s least) to 300000', () => {
  assert.is(loadConfig({ RELAY_KAFKA_SESSION_TIMEOUT_MS: '6000' }).kafkaSessionTimeoutMs, 6000);
  assert.is(loadConfig({ RELAY_KAFKA_SESSION_TIMEOUT_MS: '300000' }).kafkaSessionTimeoutMs, 300_000);
  for (const value of ['5999', '300001', '0', '10s', '1e4', '10000.0', '0x2710', '-10000']) {
    assert.match(refused({ RELAY_KAFKA_SESSION_TIMEOUT_MS: value }, 'RELAY_KAFKA_SESSION_TIMEOUT_MS'), /from 6000 to 300000/);
  }
});

test.run();
