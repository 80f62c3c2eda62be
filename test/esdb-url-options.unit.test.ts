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
import { loadConfig } from '../infra/config.ts';

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

test.run();
