// docs/configuration.md: RELAY_EVENTSTORE_URL is read at start by the client's own parser, and
// only "an option it does not know (a misspelling it would ignore)" is refused. The installed
// @eventstore/db-client (dist/Client/parseConnectionString.js, verifyKeyValuePair) also reads
// the query key `dnsDiscover` (exactly so spelt; it is not in mapToQueryOption, but the switch
// has a case for it): `?dnsDiscover=true` turns gossip discovery on, as esdb+discover:// does.
// A connection string that started Relay before must still be accepted, and must still mean
// discovery.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { parseConnectionString } from '@eventstore/db-client/dist/Client/parseConnectionString.js';
import { ConfigError, loadConfig } from '../infra/config.ts';

test('?dnsDiscover=true, which the client reads, is accepted in RELAY_EVENTSTORE_URL', () => {
  const url = 'esdb://admin:pw@cluster.example.internal:2113?tls=false&dnsDiscover=true';
  // What the client makes of it: discovery through the one host named.
  assert.is(parseConnectionString(url).dnsDiscover, true);
  let message = '';
  try {
    assert.is(loadConfig({ RELAY_EVENTSTORE_URL: url }).eventStoreUrl, url);
  } catch (error) {
    message = (error as Error).message;
  }
  assert.is(message, '', 'the configuration refused an option the client reads');
});

// The client reads its duration and count options with parseInt and knows no unit: "10s" is
// 10 (ms), "1.5" is 1. Such a value is refused at start, naming the option, never the password.
test('a duration or count the client would misread in RELAY_EVENTSTORE_URL is refused naming the option; whole numbers are accepted', () => {
  const problem = (query: string): string => {
    try {
      loadConfig({ RELAY_EVENTSTORE_URL: `esdb://admin:s3cret@e1:2113?tls=false&${query}` });
      return '';
    } catch (error) {
      assert.instance(error, ConfigError);
      assert.is((error as ConfigError).variable, 'RELAY_EVENTSTORE_URL');
      assert.not.ok((error as Error).message.includes('s3cret'), (error as Error).message);
      return (error as Error).message;
    }
  };
  // What the client itself makes of such a value: the number before the unit.
  assert.is(parseConnectionString('esdb://e1:2113?defaultDeadline=10s').defaultDeadline, 10);
  for (const [query, option] of [
    ['defaultDeadline=10s', 'defaultDeadline'], ['defaultDeadline=1.5', 'defaultDeadline'], ['defaultDeadline=0', 'defaultDeadline'],
    ['keepAliveInterval=10s', 'keepAliveInterval'], ['keepAliveInterval=-2', 'keepAliveInterval'], ['keep_alive_timeout=1e4', 'keepAliveTimeout'],
    ['discoveryInterval=100ms', 'discoveryInterval'], ['gossipTimeout=500ms', 'gossipTimeout'], ['maxDiscoverAttempts=3x', 'maxDiscoverAttempts'],
  ] as const) {
    assert.match(problem(query), new RegExp(`^RELAY_EVENTSTORE_URL: ${option}: expected a whole number of `), query);
  }
  assert.match(problem('defaultDeadline=10s'), /got "10s", which the client would read as 10 milliseconds/);
  for (const query of ['defaultDeadline=10000', 'keepAliveInterval=-1&keepAliveTimeout=20000', 'discoveryInterval=0&gossipTimeout=5&maxDiscoverAttempts=10']) {
    assert.is(problem(query), '', query);
  }
});

test.run();
