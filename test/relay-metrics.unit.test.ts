// The labels Relay's metric definitions give values (apps/relay-metrics.ts): bounded sets,
// never an id, an address or a raw status line.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { webhookResultOf } from '../apps/relay-metrics.ts';

const test = suite('metric labels');

test('a webhook attempt\'s result: the status class when a status came back, else the error code, else network_error', () => {
  assert.equal([200, 204, 302, 410, 503].map((status) => webhookResultOf(status, status < 300 ? null : 'http_error')), ['2xx', '2xx', '3xx', '4xx', '5xx']);
  assert.is(webhookResultOf(302, 'redirect'), '3xx');
  for (const code of ['timeout', 'connection_refused', 'connection_reset', 'tls_error', 'dns_failure', 'unsafe_destination', 'endpoint_disabled', 'endpoint_deleted', 'endpoint_unsubscribed']) {
    assert.is(webhookResultOf(null, code), code);
  }
  assert.is(webhookResultOf(null, 'network_error'), 'network_error');
  assert.is(webhookResultOf(null, 'something new'), 'network_error', 'an unknown code does not make a new series');
  assert.is(webhookResultOf(999, null), 'network_error', 'nor does a status out of range');
});

test.run();
