// Which IP addresses a webhook may be delivered to. Built from the IANA IPv4 and IPv6
// Special-Purpose Address Registries, plus multicast and the IPv6 blocks IANA has not
// allocated for unicast (everything outside 2000::/3).
//
// Stricter than the registries on purpose: a few entries they mark "globally reachable"
// (anycast service addresses, AMT, AS112, ORCHIDv2, drone HHITs, the NAT64 well-known prefix)
// are refused too. None of them hosts a customer's webhook, and the translation prefixes
// (NAT64, 6to4, Teredo, IPv4-mapped/compatible) reach an IPv4 address chosen by whoever
// writes the DNS record, which may well be one of ours. Anything that does not parse is
// refused as well: this function guards egress, so it fails closed.
import net from 'node:net';

export interface AddressClassification {
  global: boolean;
  /** Stable name of the special-purpose range the address is in; null for a global address. */
  range: string | null;
  /** The registry block, e.g. "127.0.0.0/8"; null for a global address. */
  cidr: string | null;
  /**
   * For the forms that carry an IPv4 address (IPv4-mapped/compatible, NAT64, 6to4, Teredo
   * client): that address and its own classification. The outer address stays non-global
   * whatever this says.
   */
  embeddedIpv4?: { address: string; global: boolean; range: string | null };
}

export interface SpecialRange {
  name: string;
  cidr: string;
  description: string;
}

interface CompiledRange extends SpecialRange {
  family: 4 | 6;
  base: bigint;
  prefix: number;
  embeds?: (value: bigint) => number;
}

const IPV4_RANGES: SpecialRange[] = [
  { name: 'this-network', cidr: '0.0.0.0/8', description: '"this network" (RFC 791)' },
  { name: 'unspecified', cidr: '0.0.0.0/32', description: 'the unspecified address' },
  { name: 'private-use', cidr: '10.0.0.0/8', description: 'private use (RFC 1918)' },
  { name: 'cgnat', cidr: '100.64.0.0/10', description: 'shared address space for carrier-grade NAT (RFC 6598)' },
  { name: 'loopback', cidr: '127.0.0.0/8', description: 'loopback' },
  { name: 'link-local', cidr: '169.254.0.0/16', description: 'link-local (RFC 3927)' },
  { name: 'private-use', cidr: '172.16.0.0/12', description: 'private use (RFC 1918)' },
  { name: 'ietf-protocol-assignments', cidr: '192.0.0.0/24', description: 'IETF protocol assignments (RFC 6890)' },
  { name: 'ipv4-service-continuity', cidr: '192.0.0.0/29', description: 'IPv4 service continuity prefix, DS-Lite (RFC 7335)' },
  { name: 'ipv4-dummy', cidr: '192.0.0.8/32', description: 'IPv4 dummy address (RFC 7600)' },
  { name: 'pcp-anycast', cidr: '192.0.0.9/32', description: 'Port Control Protocol anycast (RFC 7723)' },
  { name: 'turn-anycast', cidr: '192.0.0.10/32', description: 'TURN anycast (RFC 8155)' },
  { name: 'nat64-discovery', cidr: '192.0.0.170/31', description: 'NAT64/DNS64 discovery (RFC 7050)' },
  { name: 'documentation', cidr: '192.0.2.0/24', description: 'documentation, TEST-NET-1 (RFC 5737)' },
  { name: 'as112', cidr: '192.31.196.0/24', description: 'AS112 DNS sink (RFC 7535)' },
  { name: 'amt', cidr: '192.52.193.0/24', description: 'AMT relay anycast (RFC 7450)' },
  { name: '6to4-relay-anycast', cidr: '192.88.99.0/24', description: 'deprecated 6to4 relay anycast (RFC 7526)' },
  { name: 'private-use', cidr: '192.168.0.0/16', description: 'private use (RFC 1918)' },
  { name: 'as112', cidr: '192.175.48.0/24', description: 'AS112 direct delegation DNS sink (RFC 7534)' },
  { name: 'benchmarking', cidr: '198.18.0.0/15', description: 'benchmarking (RFC 2544)' },
  { name: 'documentation', cidr: '198.51.100.0/24', description: 'documentation, TEST-NET-2 (RFC 5737)' },
  { name: 'documentation', cidr: '203.0.113.0/24', description: 'documentation, TEST-NET-3 (RFC 5737)' },
  { name: 'multicast', cidr: '224.0.0.0/4', description: 'multicast (RFC 5771)' },
  { name: 'reserved', cidr: '240.0.0.0/4', description: 'reserved for future use (RFC 1112)' },
  { name: 'broadcast', cidr: '255.255.255.255/32', description: 'limited broadcast (RFC 919)' },
];

const IPV6_RANGES: SpecialRange[] = [
  { name: 'unspecified', cidr: '::/128', description: 'the unspecified address' },
  { name: 'loopback', cidr: '::1/128', description: 'loopback' },
  { name: 'ipv4-compatible', cidr: '::/96', description: 'deprecated IPv4-compatible addresses (RFC 4291)' },
  { name: 'ipv4-mapped', cidr: '::ffff:0:0/96', description: 'IPv4-mapped addresses (RFC 4291)' },
  { name: 'ipv4-translated', cidr: '::ffff:0:0:0/96', description: 'IPv4-translated addresses (RFC 2765)' },
  { name: 'nat64', cidr: '64:ff9b::/96', description: 'NAT64 well-known prefix (RFC 6052)' },
  { name: 'nat64-local-use', cidr: '64:ff9b:1::/48', description: 'local-use IPv4/IPv6 translation (RFC 8215)' },
  { name: 'discard-only', cidr: '100::/64', description: 'discard-only (RFC 6666)' },
  { name: 'dummy-prefix', cidr: '100:0:0:1::/64', description: 'dummy IPv6 prefix (RFC 9780)' },
  { name: 'ietf-protocol-assignments', cidr: '2001::/23', description: 'IETF protocol assignments (RFC 2928)' },
  { name: 'teredo', cidr: '2001::/32', description: 'Teredo (RFC 4380)' },
  { name: 'pcp-anycast', cidr: '2001:1::1/128', description: 'Port Control Protocol anycast (RFC 7723)' },
  { name: 'turn-anycast', cidr: '2001:1::2/128', description: 'TURN anycast (RFC 8155)' },
  { name: 'dns-sd-srp-anycast', cidr: '2001:1::3/128', description: 'DNS-SD service registration protocol anycast (RFC 9665)' },
  { name: 'benchmarking', cidr: '2001:2::/48', description: 'benchmarking (RFC 5180)' },
  { name: 'amt', cidr: '2001:3::/32', description: 'AMT (RFC 7450)' },
  { name: 'as112', cidr: '2001:4:112::/48', description: 'AS112-v6 DNS sink (RFC 7535)' },
  { name: 'orchid', cidr: '2001:10::/28', description: 'deprecated ORCHID (RFC 4843)' },
  { name: 'orchid-v2', cidr: '2001:20::/28', description: 'ORCHIDv2, not routable (RFC 7343)' },
  { name: 'drone-remote-id', cidr: '2001:30::/28', description: 'drone remote ID protocol entity tags (RFC 9374)' },
  { name: 'documentation', cidr: '2001:db8::/32', description: 'documentation (RFC 3849)' },
  { name: '6to4', cidr: '2002::/16', description: '6to4 (RFC 3056)' },
  { name: 'as112', cidr: '2620:4f:8000::/48', description: 'AS112 direct delegation DNS sink (RFC 7534)' },
  { name: 'documentation', cidr: '3fff::/20', description: 'documentation (RFC 9637)' },
  { name: 'srv6-sids', cidr: '5f00::/16', description: 'segment routing (SRv6) SIDs (RFC 9602)' },
  { name: 'unique-local', cidr: 'fc00::/7', description: 'unique local addresses (RFC 4193)' },
  { name: 'link-local', cidr: 'fe80::/10', description: 'link-local unicast (RFC 4291)' },
  { name: 'site-local', cidr: 'fec0::/10', description: 'deprecated site-local (RFC 3879)' },
  { name: 'multicast', cidr: 'ff00::/8', description: 'multicast (RFC 4291)' },
  // IANA IPv6 Address Space: only 2000::/3 is allocated for global unicast; the rest not named
  // above is reserved by the IETF.
  ...['::/8', '100::/8', '200::/7', '400::/6', '800::/5', '1000::/4', '4000::/3', '6000::/3', '8000::/3', 'a000::/3', 'c000::/3', 'e000::/4', 'f000::/5', 'f800::/6', 'fe00::/9'].map(
    (cidr) => ({ name: 'reserved', cidr, description: 'reserved by the IETF, outside global unicast 2000::/3' }),
  ),
];

function parseIpv4(text: string): number | null {
  const parts = text.split('.');
  if (parts.length !== 4) return null;
  let value = 0;
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part) || Number(part) > 255) return null;
    value = value * 256 + Number(part);
  }
  return value;
}

function formatIpv4(value: number): string {
  return [value >>> 24, (value >>> 16) & 255, (value >>> 8) & 255, value & 255].join('.');
}

function parseIpv6(text: string): bigint | null {
  let s = text.toLowerCase();
  const zone = s.indexOf('%');
  if (zone >= 0) s = s.slice(0, zone);
  const lastColon = s.lastIndexOf(':');
  if (s.slice(lastColon + 1).includes('.')) {
    const v4 = parseIpv4(s.slice(lastColon + 1));
    if (v4 === null) return null;
    s = `${s.slice(0, lastColon + 1)}${(v4 >>> 16).toString(16)}:${(v4 & 0xffff).toString(16)}`;
  }
  const halves = s.split('::');
  if (halves.length > 2) return null;
  const head = halves[0] ? halves[0].split(':') : [];
  let groups = head;
  if (halves.length === 2) {
    const tail = halves[1] ? halves[1].split(':') : [];
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return null;
    groups = [...head, ...Array<string>(missing).fill('0'), ...tail];
  }
  if (groups.length !== 8) return null;
  let value = 0n;
  for (const group of groups) {
    if (!/^[0-9a-f]{1,4}$/.test(group)) return null;
    value = (value << 16n) | BigInt(Number.parseInt(group, 16));
  }
  return value;
}

const low32 = (value: bigint) => Number(value & 0xffffffffn);

// Where each translation scheme keeps its IPv4 address.
const EMBEDDED_IPV4: Record<string, (value: bigint) => number> = {
  'ipv4-compatible': low32,
  'ipv4-mapped': low32,
  'ipv4-translated': low32,
  nat64: low32,
  '6to4': (value) => Number((value >> 80n) & 0xffffffffn),
  // The Teredo client's address is stored inverted (RFC 4380 section 4).
  teredo: (value) => Number(~value & 0xffffffffn),
};

function compile(range: SpecialRange, family: 4 | 6): CompiledRange {
  const [address, prefixText] = range.cidr.split('/');
  const prefix = Number(prefixText);
  const width = family === 4 ? 32 : 128;
  const parsed = family === 4 ? parseIpv4(address) : parseIpv6(address);
  if (parsed === null || !(prefix >= 0 && prefix <= width)) throw new Error(`bad range ${range.cidr}`);
  const base = BigInt(parsed);
  if (base & ((1n << BigInt(width - prefix)) - 1n)) throw new Error(`range ${range.cidr} has host bits set`);
  return { ...range, family, base, prefix, embeds: EMBEDDED_IPV4[range.name] };
}

const COMPILED = [...IPV4_RANGES.map((r) => compile(r, 4)), ...IPV6_RANGES.map((r) => compile(r, 6))];

/** Every named range, for documentation and for tests that want to cover each one. */
export const SPECIAL_PURPOSE_RANGES: readonly Readonly<SpecialRange & { family: 4 | 6 }>[] = COMPILED.map(({ name, cidr, description, family }) => ({ name, cidr, description, family }));

/** The most specific special-purpose range holding the address, if any. */
function mostSpecific(value: bigint, family: 4 | 6): CompiledRange | undefined {
  const width = family === 4 ? 32 : 128;
  let best: CompiledRange | undefined;
  for (const range of COMPILED) {
    if (range.family !== family || (best && best.prefix >= range.prefix)) continue;
    if (value >> BigInt(width - range.prefix) === range.base >> BigInt(width - range.prefix)) best = range;
  }
  return best;
}

export function classifyAddress(ip: string): AddressClassification {
  const family = net.isIP(ip);
  const value = family === 4 ? parseIpv4(ip) : family === 6 ? parseIpv6(ip) : null;
  if (value === null) return { global: false, range: 'invalid', cidr: null };
  const range = mostSpecific(BigInt(value), family as 4 | 6);
  if (!range) return { global: true, range: null, cidr: null };
  const result: AddressClassification = { global: false, range: range.name, cidr: range.cidr };
  if (range.embeds) {
    const address = formatIpv4(range.embeds(BigInt(value)));
    const inner = classifyAddress(address);
    result.embeddedIpv4 = { address, global: inner.global, range: inner.range };
  }
  return result;
}

/**
 * The address in a proxy's "a.b.c.d:port", "[v6]:port" or "[v6]" (forms some write into
 * X-Forwarded-For), else the text as given.
 */
function withoutPort(text: string): string {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/.exec(text);
  if (v4 && net.isIPv4(v4[1])) return v4[1];
  const v6 = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/.exec(text);
  if (v6 && net.isIPv6(v6[1])) return v6[1];
  return text;
}

/** What every client text that names no address counts as: one bucket, not one per spelling. */
export const UNPARSED_CLIENT = 'unparsed';

/**
 * The network a client's address stands for when counting what one client does: an IPv4
 * address itself (also when IPv4-mapped: a dual-stack socket reports "::ffff:a.b.c.d"), and for
 * IPv6 its /64, the smallest block a site is given (RFC 6177) and whose addresses any host on it
 * may take at will. A port a proxy wrote with the address is dropped (each connection has its
 * own, so it would make every attempt a new client); text that is no address at all counts as
 * UNPARSED_CLIENT, so that varying it gains nothing.
 */
export function clientNetworkOf(text: string): string {
  const ip = withoutPort(text);
  const family = net.isIP(ip);
  if (family === 0) return UNPARSED_CLIENT;
  if (family !== 6) return ip;
  const value = parseIpv6(ip);
  if (value === null) return ip;
  if (value >> 32n === 0xffffn) return formatIpv4(low32(value));
  const groups = Array.from({ length: 4 }, (_, i) => ((value >> BigInt(112 - 16 * i)) & 0xffffn).toString(16));
  return `${groups.join(':')}::/64`;
}
