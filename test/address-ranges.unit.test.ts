// Which addresses webhooks may reach: every IANA special-purpose range (plus multicast and
// the IPv6 space outside 2000::/3) is non-global and named; the rest is global. Nothing here
// connects anywhere: classification is pure.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { classifyAddress, SPECIAL_PURPOSE_RANGES } from '../infra/http/address-ranges.ts';

interface Row {
  range: string;
  cidr: string;
  inside: string[];
  /** Just outside the block: what each address is instead (null: global). */
  outside?: [string, string | null][];
}

const ROWS: Row[] = [
  // IPv4
  { range: 'this-network', cidr: '0.0.0.0/8', inside: ['0.0.0.1', '0.255.255.255'], outside: [['1.0.0.0', null]] },
  { range: 'unspecified', cidr: '0.0.0.0/32', inside: ['0.0.0.0'], outside: [['0.0.0.1', 'this-network']] },
  { range: 'private-use', cidr: '10.0.0.0/8', inside: ['10.0.0.0', '10.255.255.255'], outside: [['9.255.255.255', null], ['11.0.0.0', null]] },
  { range: 'cgnat', cidr: '100.64.0.0/10', inside: ['100.64.0.0', '100.127.255.255'], outside: [['100.63.255.255', null], ['100.128.0.0', null]] },
  { range: 'loopback', cidr: '127.0.0.0/8', inside: ['127.0.0.1', '127.255.255.254'], outside: [['126.255.255.255', null], ['128.0.0.0', null]] },
  { range: 'link-local', cidr: '169.254.0.0/16', inside: ['169.254.169.254', '169.254.0.1'], outside: [['169.253.255.255', null], ['169.255.0.0', null]] },
  { range: 'private-use', cidr: '172.16.0.0/12', inside: ['172.16.0.0', '172.31.255.255'], outside: [['172.15.255.255', null], ['172.32.0.0', null]] },
  { range: 'ietf-protocol-assignments', cidr: '192.0.0.0/24', inside: ['192.0.0.100', '192.0.0.255'], outside: [['191.255.255.255', null], ['192.0.1.0', null]] },
  { range: 'ipv4-service-continuity', cidr: '192.0.0.0/29', inside: ['192.0.0.0', '192.0.0.7'], outside: [['192.0.0.8', 'ipv4-dummy']] },
  { range: 'ipv4-dummy', cidr: '192.0.0.8/32', inside: ['192.0.0.8'], outside: [['192.0.0.11', 'ietf-protocol-assignments']] },
  { range: 'pcp-anycast', cidr: '192.0.0.9/32', inside: ['192.0.0.9'] },
  { range: 'turn-anycast', cidr: '192.0.0.10/32', inside: ['192.0.0.10'] },
  { range: 'nat64-discovery', cidr: '192.0.0.170/31', inside: ['192.0.0.170', '192.0.0.171'], outside: [['192.0.0.169', 'ietf-protocol-assignments'], ['192.0.0.172', 'ietf-protocol-assignments']] },
  { range: 'documentation', cidr: '192.0.2.0/24', inside: ['192.0.2.1', '192.0.2.255'], outside: [['192.0.1.255', null], ['192.0.3.0', null]] },
  { range: 'as112', cidr: '192.31.196.0/24', inside: ['192.31.196.1'], outside: [['192.31.195.255', null], ['192.31.197.0', null]] },
  { range: 'amt', cidr: '192.52.193.0/24', inside: ['192.52.193.1'], outside: [['192.52.192.255', null], ['192.52.194.0', null]] },
  { range: '6to4-relay-anycast', cidr: '192.88.99.0/24', inside: ['192.88.99.1'], outside: [['192.88.98.255', null], ['192.88.100.0', null]] },
  { range: 'private-use', cidr: '192.168.0.0/16', inside: ['192.168.0.1', '192.168.255.255'], outside: [['192.167.255.255', null], ['192.169.0.0', null]] },
  { range: 'as112', cidr: '192.175.48.0/24', inside: ['192.175.48.6'], outside: [['192.175.47.255', null], ['192.175.49.0', null]] },
  { range: 'benchmarking', cidr: '198.18.0.0/15', inside: ['198.18.0.1', '198.19.255.255'], outside: [['198.17.255.255', null], ['198.20.0.0', null]] },
  { range: 'documentation', cidr: '198.51.100.0/24', inside: ['198.51.100.7'], outside: [['198.51.99.255', null], ['198.51.101.0', null]] },
  { range: 'documentation', cidr: '203.0.113.0/24', inside: ['203.0.113.9'], outside: [['203.0.112.255', null], ['203.0.114.0', null]] },
  { range: 'multicast', cidr: '224.0.0.0/4', inside: ['224.0.0.1', '239.255.255.250'], outside: [['223.255.255.255', null], ['240.0.0.0', 'reserved']] },
  { range: 'reserved', cidr: '240.0.0.0/4', inside: ['240.0.0.1', '255.255.255.254'] },
  { range: 'broadcast', cidr: '255.255.255.255/32', inside: ['255.255.255.255'], outside: [['255.255.255.254', 'reserved']] },
  // IPv6
  { range: 'unspecified', cidr: '::/128', inside: ['::', '0:0:0:0:0:0:0:0'], outside: [['::2', 'ipv4-compatible']] },
  { range: 'loopback', cidr: '::1/128', inside: ['::1', '0:0:0:0:0:0:0:1'], outside: [['::2', 'ipv4-compatible']] },
  { range: 'ipv4-compatible', cidr: '::/96', inside: ['::127.0.0.1', '::8.8.8.8'], outside: [['::1:0:0:0', 'reserved']] },
  { range: 'ipv4-mapped', cidr: '::ffff:0:0/96', inside: ['::ffff:127.0.0.1', '::ffff:7f00:1', '::ffff:8.8.8.8'], outside: [['::fffe:ffff:ffff', 'reserved']] },
  { range: 'ipv4-translated', cidr: '::ffff:0:0:0/96', inside: ['::ffff:0:10.0.0.1'], outside: [['::1:ffff:0:0:0', 'reserved']] },
  { range: 'nat64', cidr: '64:ff9b::/96', inside: ['64:ff9b::8.8.8.8', '64:ff9b::7f00:1'], outside: [['64:ff9b::1:0:0', 'reserved']] },
  { range: 'nat64-local-use', cidr: '64:ff9b:1::/48', inside: ['64:ff9b:1::a00:1'], outside: [['64:ff9b:2::1', 'reserved']] },
  { range: 'discard-only', cidr: '100::/64', inside: ['100::1'], outside: [['100:0:0:2::', 'reserved']] },
  { range: 'dummy-prefix', cidr: '100:0:0:1::/64', inside: ['100:0:0:1::1'], outside: [['100:0:0:2::1', 'reserved']] },
  { range: 'ietf-protocol-assignments', cidr: '2001::/23', inside: ['2001:100::1', '2001:1ff:ffff::1'], outside: [['2001:200::1', null], ['2000:ffff::1', null]] },
  { range: 'teredo', cidr: '2001::/32', inside: ['2001:0:4136:e378:8000:63bf:3fff:fdd2'], outside: [['2001:1::4', 'ietf-protocol-assignments']] },
  { range: 'pcp-anycast', cidr: '2001:1::1/128', inside: ['2001:1::1'], outside: [['2001:1::4', 'ietf-protocol-assignments']] },
  { range: 'turn-anycast', cidr: '2001:1::2/128', inside: ['2001:1::2'] },
  { range: 'dns-sd-srp-anycast', cidr: '2001:1::3/128', inside: ['2001:1::3'] },
  { range: 'benchmarking', cidr: '2001:2::/48', inside: ['2001:2::1', '2001:2:0:ffff::1'], outside: [['2001:2:1::1', 'ietf-protocol-assignments']] },
  { range: 'amt', cidr: '2001:3::/32', inside: ['2001:3::1'], outside: [['2001:4::1', 'ietf-protocol-assignments']] },
  { range: 'as112', cidr: '2001:4:112::/48', inside: ['2001:4:112::1'], outside: [['2001:4:113::1', 'ietf-protocol-assignments']] },
  { range: 'orchid', cidr: '2001:10::/28', inside: ['2001:10::1'], outside: [['2001:f::1', 'ietf-protocol-assignments']] },
  { range: 'orchid-v2', cidr: '2001:20::/28', inside: ['2001:20::1', '2001:2f:ffff::1'], outside: [['2001:30::1', 'drone-remote-id']] },
  { range: 'drone-remote-id', cidr: '2001:30::/28', inside: ['2001:30::1'], outside: [['2001:40::1', 'ietf-protocol-assignments']] },
  { range: 'documentation', cidr: '2001:db8::/32', inside: ['2001:db8::1', '2001:db8:ffff::1'], outside: [['2001:db7:ffff::1', null], ['2001:db9::1', null]] },
  { range: '6to4', cidr: '2002::/16', inside: ['2002:c000:201::1', '2002:808:808::1'], outside: [['2001:ffff::1', null], ['2003::1', null]] },
  { range: 'as112', cidr: '2620:4f:8000::/48', inside: ['2620:4f:8000::1'], outside: [['2620:4f:7fff::1', null], ['2620:4f:8001::1', null]] },
  { range: 'documentation', cidr: '3fff::/20', inside: ['3fff::1', '3fff:fff::1'], outside: [['3fff:1000::1', null], ['3ffe:ffff::1', null]] },
  { range: 'srv6-sids', cidr: '5f00::/16', inside: ['5f00::1'], outside: [['5f01::1', 'reserved']] },
  { range: 'unique-local', cidr: 'fc00::/7', inside: ['fc00::1', 'fd12:3456:789a::1'], outside: [['fbff::1', 'reserved'], ['fe00::1', 'reserved']] },
  { range: 'link-local', cidr: 'fe80::/10', inside: ['fe80::1', 'febf:ffff::1', 'fe80::1%eth0'], outside: [['fec0::1', 'site-local']] },
  { range: 'site-local', cidr: 'fec0::/10', inside: ['fec0::1', 'feff::1'], outside: [['ff00::1', 'multicast']] },
  { range: 'multicast', cidr: 'ff00::/8', inside: ['ff02::1', 'ff0e::fb', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'] },
  { range: 'reserved', cidr: '::/8', inside: ['::1:0:0:0', 'ff:ffff::1'], outside: [['100::1', 'discard-only']] },
  { range: 'reserved', cidr: '100::/8', inside: ['101::1'] },
  { range: 'reserved', cidr: '200::/7', inside: ['200::1'] },
  { range: 'reserved', cidr: '400::/6', inside: ['400::1'] },
  { range: 'reserved', cidr: '800::/5', inside: ['800::1'] },
  { range: 'reserved', cidr: '1000::/4', inside: ['1000::1', '1fff:ffff::1'], outside: [['2000::1', null]] },
  { range: 'reserved', cidr: '4000::/3', inside: ['4000::1', '5fff::1'] },
  { range: 'reserved', cidr: '6000::/3', inside: ['6000::1'] },
  { range: 'reserved', cidr: '8000::/3', inside: ['8000::1'] },
  { range: 'reserved', cidr: 'a000::/3', inside: ['a000::1'] },
  { range: 'reserved', cidr: 'c000::/3', inside: ['c000::1'] },
  { range: 'reserved', cidr: 'e000::/4', inside: ['e000::1'] },
  { range: 'reserved', cidr: 'f000::/5', inside: ['f000::1'] },
  { range: 'reserved', cidr: 'f800::/6', inside: ['f800::1'] },
  { range: 'reserved', cidr: 'fe00::/9', inside: ['fe00::1', 'fe7f::1'], outside: [['fe80::1', 'link-local']] },
];

const ranges = suite('address ranges');

for (const row of ROWS) {
  ranges(`${row.cidr} is ${row.range}: addresses inside are non-global and named, those just outside are not in it`, () => {
    for (const address of row.inside) {
      const result = classifyAddress(address);
      assert.is(result.global, false, `${address} global`);
      assert.is(result.range, row.range, `${address} range`);
      assert.is(result.cidr, row.cidr, `${address} cidr`);
    }
    for (const [address, expected] of row.outside ?? []) {
      const result = classifyAddress(address);
      assert.is(result.range, expected, `${address} (outside ${row.cidr}) range`);
      assert.is(result.global, expected === null, `${address} (outside ${row.cidr}) global`);
    }
  });
}

ranges('every named range has a row above', () => {
  const tested = new Set(ROWS.map((row) => `${row.range} ${row.cidr}`));
  const untested = SPECIAL_PURPOSE_RANGES.filter((r) => !tested.has(`${r.name} ${r.cidr}`)).map((r) => `${r.name} ${r.cidr}`);
  assert.equal(untested, []);
});

ranges('given public addresses of well-known services, then they are global', () => {
  for (const address of ['8.8.8.8', '1.1.1.1', '9.9.9.9', '208.67.222.222', '2606:4700:4700::1111', '2001:4860:4860::8888', '2a00:1450:4001:80b::200e', '2001:200::1']) {
    assert.equal(classifyAddress(address), { global: true, range: null, cidr: null }, address);
  }
});

ranges('given an IPv4-mapped or compatible address, then the embedded IPv4 is classified too but the address stays non-global', () => {
  assert.equal(classifyAddress('::ffff:127.0.0.1').embeddedIpv4, { address: '127.0.0.1', global: false, range: 'loopback' });
  assert.equal(classifyAddress('::ffff:a9fe:a9fe').embeddedIpv4, { address: '169.254.169.254', global: false, range: 'link-local' });
  const mappedPublic = classifyAddress('::ffff:8.8.8.8');
  assert.is(mappedPublic.global, false);
  assert.equal(mappedPublic.embeddedIpv4, { address: '8.8.8.8', global: true, range: null });
  assert.equal(classifyAddress('::10.1.2.3').embeddedIpv4, { address: '10.1.2.3', global: false, range: 'private-use' });
});

ranges('given NAT64, 6to4 and Teredo addresses, then the IPv4 address they lead to is reported', () => {
  assert.equal(classifyAddress('64:ff9b::192.168.1.1').embeddedIpv4, { address: '192.168.1.1', global: false, range: 'private-use' });
  assert.equal(classifyAddress('2002:7f00:1::1').embeddedIpv4, { address: '127.0.0.1', global: false, range: 'loopback' });
  // RFC 4380's example: the client's address 192.0.2.45 is stored inverted.
  assert.equal(classifyAddress('2001:0:4136:e378:8000:63bf:3fff:fdd2').embeddedIpv4, { address: '192.0.2.45', global: false, range: 'documentation' });
  assert.is(classifyAddress('2002:808:808::1').global, false, '6to4 of a public address is still refused');
});

ranges('given upper-case IPv6, then it is classified like lower-case', () => {
  assert.is(classifyAddress('FE80::1').range, 'link-local');
  assert.is(classifyAddress('::FFFF:127.0.0.1').range, 'ipv4-mapped');
});

ranges('given something that is not an IP address, then it is refused as invalid (fail closed)', () => {
  for (const input of ['', 'localhost', 'example.com', '256.0.0.1', '127.1', '1.2.3', '010.0.0.1', '0x7f.0.0.1', '::g', '1:2:3:4:5:6:7:8:9', '[::1]']) {
    assert.equal(classifyAddress(input), { global: false, range: 'invalid', cidr: null }, JSON.stringify(input));
  }
});

ranges.run();
