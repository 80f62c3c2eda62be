// A small authoritative DNS server for tests: answers from an in-memory zone over UDP and
// TCP on the same loopback port, so code under test can go through a real resolver
// (node:dns / c-ares) instead of a stub. Answers carry TTL 0 and negative answers carry
// no SOA, so nothing a resolver caches can outlive a setZone() call, unless a test gives a
// record its own `ttl` or sets `negativeTtl` (then negative answers carry an SOA with that
// minimum, RFC 2308).
// A null MX (RFC 7505) is an MX record with exchange "." and preference 0.
// It can play a validating resolver too: answers for the names `authenticated` accepts carry
// the AD bit when the query asked for DNSSEC (DO bit), as a validating resolver's would.
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet, Question } from 'dns-packet';

export type ZoneRecord = (
  /** A string longer than 255 chars is split into 255-char character-strings, as a real zone would be. */
  | { name: string; type: 'TXT'; data: string | string[] }
  | { name: string; type: 'MX'; data: { preference: number; exchange: string } }
  | { name: string; type: 'A'; data: string }
  | { name: string; type: 'AAAA'; data: string }
  | { name: string; type: 'TLSA'; data: { usage: number; selector: number; matchingType: number; certificate: Buffer } }
  /** Not a record: every query for this name is answered SERVFAIL, as a broken upstream would. */
  | { name: string; type: 'SERVFAIL' }
) & { /** Seconds; default 0. */ ttl?: number };

export interface ServedQuery {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
  /** True when the UDP answer did not fit and only a truncated (TC) reply was sent. */
  truncated: boolean;
}

export interface TestDnsServer {
  /** `127.0.0.1:<port>`, ready for Resolver#setServers. */
  address: string;
  port: number;
  setZone(zone: ZoneRecord[]): void;
  /** Every query answered so far, in arrival order. */
  queries: ServedQuery[];
  /** When set, NXDOMAIN and empty answers carry an SOA whose TTL and MINIMUM are this many seconds. */
  negativeTtl: number | null;
  /** Names (and types) whose answers carry the AD bit to a query with the DO bit. Default none. */
  authenticated: (name: string, type: string) => boolean;
  /** Whether each query asked with the DO bit, in arrival order (same indexes as `queries`). */
  dnssecOk: boolean[];
  close(): Promise<void>;
}

const RCODE_NOERROR = 0;
const RCODE_FORMERR = 1;
const RCODE_SERVFAIL = 2;
const RCODE_NXDOMAIN = 3;
const RCODE_NOTIMP = 4;
// Without EDNS a UDP reply may not exceed 512 bytes (RFC 1035 4.2.1).
const CLASSIC_UDP_LIMIT = 512;

function canonical(name: string): string {
  return name.toLowerCase().replace(/\.$/, '');
}

function txtStrings(data: string | string[]): string[] {
  const chunks = typeof data === 'string' ? (data.match(/[\s\S]{1,255}/g) ?? ['']) : data;
  for (const chunk of chunks) {
    if (Buffer.byteLength(chunk) > 255) throw new Error(`TXT character-string longer than 255 bytes: ${chunk.slice(0, 40)}…`);
  }
  return chunks;
}

function toAnswer(record: ZoneRecord, queriedName: string): Answer {
  const base = { name: queriedName, ttl: record.ttl ?? 0, class: 'IN' as const };
  switch (record.type) {
    case 'TXT': return { ...base, type: 'TXT', data: txtStrings(record.data) };
    case 'MX': return { ...base, type: 'MX', data: { preference: record.data.preference, exchange: record.data.exchange } };
    case 'A': return { ...base, type: 'A', data: record.data };
    case 'AAAA': return { ...base, type: 'AAAA', data: record.data };
    case 'TLSA': return { ...base, type: 'TLSA', data: record.data };
    case 'SERVFAIL': throw new Error('SERVFAIL is not a record');
  }
}

interface Behaviour {
  negativeTtl: number | null;
  authenticated: (name: string, type: string) => boolean;
}

function wantsDnssec(query: DecodedPacket): boolean {
  const opt = query.additionals?.find((a) => a.type === 'OPT');
  return (!!opt && 'flags' in opt && ((opt.flags ?? 0) & dnsPacket.DNSSEC_OK) !== 0) || query.flag_ad;
}

function respond(query: DecodedPacket, zone: ZoneRecord[], behaviour: Behaviour): Packet {
  const reply = answer(query, zone, behaviour.negativeTtl);
  const question = query.questions?.[0];
  if (question && wantsDnssec(query) && ((reply.flags ?? 0) & 0xf) !== RCODE_SERVFAIL && behaviour.authenticated(canonical(question.name), question.type)) {
    return { ...reply, flags: (reply.flags ?? 0) | dnsPacket.AUTHENTIC_DATA };
  }
  return reply;
}

function answer(query: DecodedPacket, zone: ZoneRecord[], negativeTtl: number | null): Packet {
  const base = { type: 'response' as const, id: query.id, questions: query.questions };
  // Mirror RD so strict clients accept the reply; we never recurse, so RA stays clear.
  const rd = query.flag_rd ? dnsPacket.RECURSION_DESIRED : 0;
  const question: Question | undefined = query.questions?.[0];
  if (!question || (query.questions?.length ?? 0) !== 1) return { ...base, flags: rd | RCODE_FORMERR };
  if (question.class && question.class !== 'IN') return { ...base, flags: rd | RCODE_NOTIMP };
  const atName = zone.filter((r) => canonical(r.name) === canonical(question.name));
  if (atName.some((r) => r.type === 'SERVFAIL')) return { ...base, flags: rd | RCODE_SERVFAIL };
  const soa: Answer[] = negativeTtl === null ? [] : [{
    name: question.name.split('.').slice(-1).join('.') || '.', type: 'SOA', ttl: negativeTtl, class: 'IN',
    data: { mname: 'ns.test', rname: 'hostmaster.test', serial: 1, refresh: 3600, retry: 600, expire: 86400, minimum: negativeTtl },
  }];
  if (atName.length === 0) return { ...base, flags: dnsPacket.AUTHORITATIVE_ANSWER | rd | RCODE_NXDOMAIN, authorities: soa };
  const answers = atName.filter((r) => r.type === question.type).map((r) => toAnswer(r, question.name));
  return { ...base, flags: dnsPacket.AUTHORITATIVE_ANSWER | rd | RCODE_NOERROR, answers, ...(answers.length === 0 ? { authorities: soa } : {}) };
}

function udpLimit(query: DecodedPacket): number {
  const opt = query.additionals?.find((a) => a.type === 'OPT');
  return opt && 'udpPayloadSize' in opt ? Math.max(CLASSIC_UDP_LIMIT, opt.udpPayloadSize) : CLASSIC_UDP_LIMIT;
}

function listenUdp(socket: dgram.Socket, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    socket.once('error', reject);
    socket.bind(port, '127.0.0.1', () => {
      socket.off('error', reject);
      resolve();
    });
  });
}

function listenTcp(server: net.Server, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
}

export async function startDnsServer(initialZone: ZoneRecord[]): Promise<TestDnsServer> {
  let zone = [...initialZone];
  for (const record of zone) if (record.type === 'TXT') txtStrings(record.data);
  const queries: ServedQuery[] = [];
  const dnssecOk: boolean[] = [];
  const behaviour: Behaviour = { negativeTtl: null, authenticated: () => false };
  const sockets = new Set<net.Socket>();

  const onUdpMessage = (udp: dgram.Socket, message: Buffer, remote: dgram.RemoteInfo): void => {
    let query: DecodedPacket;
    try {
      query = dnsPacket.decode(message);
    } catch {
      return; // not DNS: a real server drops it too
    }
    const reply = respond(query, zone, behaviour);
    let wire = dnsPacket.encode(reply);
    const truncated = wire.length > udpLimit(query);
    if (truncated) {
      // Tells the client to retry over TCP, where the full answer fits.
      wire = dnsPacket.encode({ ...reply, answers: [], flags: (reply.flags ?? 0) | dnsPacket.TRUNCATED_RESPONSE });
    }
    const q = query.questions?.[0];
    queries.push({ name: q?.name ?? '', type: q?.type ?? '', transport: 'udp', truncated });
    dnssecOk.push(wantsDnssec(query));
    udp.send(wire, remote.port, remote.address);
  };

  const tcp = net.createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      // TCP DNS frames each message with a two-byte length prefix (RFC 1035 4.2.2).
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const length = pending.readUInt16BE(0);
        const message = pending.subarray(2, 2 + length);
        pending = pending.subarray(2 + length);
        let query: DecodedPacket;
        try {
          query = dnsPacket.decode(message);
        } catch {
          socket.destroy();
          return;
        }
        const q = query.questions?.[0];
        queries.push({ name: q?.name ?? '', type: q?.type ?? '', transport: 'tcp', truncated: false });
        dnssecOk.push(wantsDnssec(query));
        socket.write(dnsPacket.streamEncode(respond(query, zone, behaviour)));
      }
    });
  });

  // UDP takes an ephemeral port first, then TCP claims the same number; another process
  // may hold that TCP port, so try again with a fresh one.
  let udp: dgram.Socket | undefined;
  for (let attempt = 1; !udp; attempt++) {
    const candidate = dgram.createSocket('udp4');
    candidate.on('message', (message, remote) => onUdpMessage(candidate, message, remote));
    await listenUdp(candidate, 0);
    try {
      await listenTcp(tcp, candidate.address().port);
      udp = candidate;
    } catch (error) {
      await new Promise<void>((resolve) => candidate.close(() => resolve()));
      if (attempt >= 10 || (error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
    }
  }
  const boundUdp = udp;
  const port = boundUdp.address().port;
  return {
    address: `127.0.0.1:${port}`,
    port,
    queries,
    dnssecOk,
    get negativeTtl() {
      return behaviour.negativeTtl;
    },
    set negativeTtl(value) {
      behaviour.negativeTtl = value;
    },
    get authenticated() {
      return behaviour.authenticated;
    },
    set authenticated(value) {
      behaviour.authenticated = value;
    },
    setZone(newZone) {
      for (const record of newZone) if (record.type === 'TXT') txtStrings(record.data);
      zone = [...newZone];
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await Promise.all([
        new Promise<void>((resolve) => boundUdp.close(() => resolve())),
        new Promise<void>((resolve, reject) => tcp.close((error) => (error ? reject(error) : resolve()))),
      ]);
    },
  };
}
