// The feedback SMTP server's connections per client (apps/inbound/inbound-server.ts ClientSlots):
// counted per client network, so a host that may take any address of its IPv6 /64 holds no more
// slots than one address does, and an IPv4 client is one client however its address is written.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { ClientSlots } from '../apps/inbound/inbound-server.ts';

const test = suite('inbound: connections per client network');

test('the addresses of one IPv6 /64 share their slots; another /64 has its own', () => {
  const slots = new ClientSlots(2);
  assert.is(slots.take('2001:db8:0:1::1'), '2001:db8:0:1::/64');
  assert.is(slots.take('2001:db8:0:1:ffff:ffff:ffff:fffe'), '2001:db8:0:1::/64');
  assert.is(slots.take('2001:db8:0:1::3'), null, 'a third address of the /64 is over the cap');
  assert.is(slots.take('2001:db8:0:2::1'), '2001:db8:0:2::/64', 'the next /64 is another client');
  slots.give('2001:db8:0:1::/64');
  assert.is(slots.take('2001:db8:0:1::42'), '2001:db8:0:1::/64', 'a freed slot is the /64\'s again');
});

test('an IPv4-mapped address is its IPv4 address; IPv4 clients are counted by address', () => {
  const slots = new ClientSlots(2);
  assert.is(slots.take('192.0.2.7'), '192.0.2.7');
  assert.is(slots.take('::ffff:192.0.2.7'), '192.0.2.7');
  assert.is(slots.take('::ffff:c000:207'), null, 'the same client written in hex is over the cap');
  assert.is(slots.take('192.0.2.8'), '192.0.2.8', 'the next IPv4 address is another client');
});

test.run();
