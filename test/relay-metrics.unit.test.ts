// The labels Relay's metric definitions give values (apps/relay-metrics.ts): bounded sets,
// never an id, an address or a raw status line.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createRelayMetrics, INBOUND_REFUSAL_REASONS, webhookResultOf } from '../apps/relay-metrics.ts';

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

test('the inbound server\'s refusal reasons and the stores /readyz checks: fixed sets, each its own series', async () => {
  assert.equal([...INBOUND_REFUSAL_REASONS], [
    'too_many_connections', 'too_many_from_client', 'parser_busy', 'no_room',
    'not_a_return_path', 'unknown_return_path', 'unknown_email', 'unknown_recipient',
  ]);
  const metrics = createRelayMetrics(undefined, { process: false });
  for (const reason of INBOUND_REFUSAL_REASONS) metrics.inbound.refused(reason);
  metrics.inbound.refused('no_room').inc();
  metrics.inbound.connections.set(3);
  metrics.storeReady('event_store').set(0);
  metrics.storeReady('document_store').set(1);
  metrics.storeReady('log').set(1);
  const lines = (await metrics.render()).split('\n').filter((line) => /^relay_(inbound|store)_/.test(line));
  assert.equal(lines, [
    'relay_store_ready{store="event_store"} 0', 'relay_store_ready{store="document_store"} 1', 'relay_store_ready{store="log"} 1',
    'relay_inbound_refused_total{reason="too_many_connections"} 0', 'relay_inbound_refused_total{reason="too_many_from_client"} 0',
    'relay_inbound_refused_total{reason="parser_busy"} 0', 'relay_inbound_refused_total{reason="no_room"} 1',
    'relay_inbound_refused_total{reason="not_a_return_path"} 0', 'relay_inbound_refused_total{reason="unknown_return_path"} 0',
    'relay_inbound_refused_total{reason="unknown_email"} 0', 'relay_inbound_refused_total{reason="unknown_recipient"} 0',
    'relay_inbound_connections 3',
  ]);
});

test.run();
