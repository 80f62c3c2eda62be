// A DNS stub resolver over dns-packet: one question to a recursive resolver, over UDP with a
// fall back to TCP when the answer is truncated. node:dns (c-ares) gives neither the TTLs of
// MX, TXT and TLSA answers, nor the SOA of a negative answer, nor the AD bit, and the MX
// transport needs all three: to cache by TTL (dns-cache.ts) and, for DANE, to know that a
// validating resolver vouched for an answer.
//
// Each query goes out from a fresh socket (a random source port) with a random id, and a reply
// counts only when its id and question match, so a spoofed answer has to guess both.
import { randomInt } from 'node:crypto';
import dgram from 'node:dgram';
import { getServers } from 'node:dns';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Packet, RecordType } from 'dns-packet';

export type DnsRcode = 'NOERROR' | 'NXDOMAIN' | 'SERVFAIL' | 'REFUSED' | 'FORMERR' | 'NOTIMP' | string;

export interface DnsResponse {
  rcode: DnsRcode;
  /** The AD bit: the (validating) resolver says every record in the answer is DNSSEC-secure. */
  authenticated: boolean;
  answers: Answer[];
  authorities: Answer[];
}

/** A question that got no usable answer: `code` as node:dns names it (ETIMEOUT, ESERVFAIL, EREFUSED…). */
export class DnsQueryError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = 'DnsQueryError';
    this.code = code;
  }
}

export interface StubResolverOptions {
  /** `ip`, `ip:port`, `[v6]:port`. Empty: the system's (/etc/resolv.conf, as node:dns reads it). */
  servers: string[];
  /** Per attempt. Default 5 s. */
  timeoutMs?: number;
  /** Rounds over the servers. Default 2. */
  tries?: number;
  /** Ask with the DO bit, so a validating resolver sets AD on secure answers (RFC 3225, RFC 6840 5.7). */
  dnssec?: boolean;
}

interface Server {
  host: string;
  port: number;
  family: 4 | 6;
}

const UDP_PAYLOAD = 1232; // the EDNS buffer size DNS Flag Day 2020 settled on

export function parseServer(text: string): Server {
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text);
  let host = text;
  let port = 53;
  if (bracketed) {
    host = bracketed[1];
    if (bracketed[2]) port = Number(bracketed[2]);
  } else if (!net.isIP(text)) {
    const at = text.lastIndexOf(':');
    host = text.slice(0, at);
    port = Number(text.slice(at + 1));
  }
  const family = net.isIP(host);
  if (family === 0 || !(port > 0 && port < 65536)) throw new Error(`"${text}" is not a resolver address (ip, ip:port or [v6]:port)`);
  return { host: canonicalAddress(host, family as 4 | 6), port, family: family as 4 | 6 };
}

/**
 * The form the kernel reports a reply's source in (`0:0:0:0:0:0:0:1` → `::1`, `2001:DB8::53` →
 * `2001:db8::53`), so that replies are matched against it; a zone (`%eth0`) is kept as written.
 */
function canonicalAddress(host: string, family: 4 | 6): string {
  const zone = host.indexOf('%');
  const address = zone === -1 ? host : host.slice(0, zone);
  const canonical = new net.SocketAddress({ address, family: family === 6 ? 'ipv6' : 'ipv4' }).address;
  return zone === -1 ? canonical : canonical + host.slice(zone);
}

const RCODE_ERRORS: Record<string, string> = { SERVFAIL: 'ESERVFAIL', REFUSED: 'EREFUSED', FORMERR: 'EFORMERR', NOTIMP: 'ENOTIMP' };

export class StubResolver {
  readonly #servers: Server[];
  readonly #timeoutMs: number;
  readonly #tries: number;
  readonly #dnssec: boolean;

  constructor(options: StubResolverOptions) {
    const servers = options.servers.length > 0 ? options.servers : getServers();
    this.#servers = servers.map(parseServer);
    if (this.#servers.length === 0) throw new Error('no DNS resolver configured');
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#tries = options.tries ?? 2;
    this.#dnssec = options.dnssec ?? false;
  }

  /** Whether answers may carry the AD bit (the resolver was asked with DO). */
  get dnssec(): boolean {
    return this.#dnssec;
  }

  /**
   * Asks each server in turn, `tries` rounds. NOERROR and NXDOMAIN are answers; SERVFAIL,
   * REFUSED and silence move on to the next server, and the last such failure is thrown.
   */
  async query(name: string, type: RecordType): Promise<DnsResponse> {
    let last: DnsQueryError = new DnsQueryError('ETIMEOUT', `no answer for ${type} ${name}`);
    for (let round = 0; round < this.#tries; round++) {
      for (const server of this.#servers) {
        try {
          const reply = await this.#ask(server, name, type);
          const rcode = (reply as DecodedPacket & { rcode?: string }).rcode ?? 'NOERROR';
          if (rcode === 'NOERROR' || rcode === 'NXDOMAIN') {
            return {
              rcode,
              authenticated: this.#dnssec && ((reply.flags ?? 0) & dnsPacket.AUTHENTIC_DATA) !== 0,
              answers: reply.answers ?? [],
              authorities: reply.authorities ?? [],
            };
          }
          last = new DnsQueryError(RCODE_ERRORS[rcode] ?? 'EBADRESP', `${type} ${name}: ${rcode} from ${server.host}`);
        } catch (error) {
          last = error instanceof DnsQueryError ? error : new DnsQueryError('ECONNREFUSED', `${type} ${name}: ${(error as Error).message}`);
        }
      }
    }
    throw last;
  }

  #packet(name: string, type: RecordType): Packet {
    return {
      type: 'query',
      id: randomInt(0, 65536),
      flags: dnsPacket.RECURSION_DESIRED,
      questions: [{ name, type, class: 'IN' }],
      additionals: [{ type: 'OPT', name: '.', udpPayloadSize: UDP_PAYLOAD, flags: this.#dnssec ? dnsPacket.DNSSEC_OK : 0 } as Answer],
    };
  }

  async #ask(server: Server, name: string, type: RecordType): Promise<DecodedPacket> {
    const query = this.#packet(name, type);
    const reply = await this.#udp(server, query);
    if (((reply.flags ?? 0) & dnsPacket.TRUNCATED_RESPONSE) === 0) return reply;
    return this.#tcp(server, { ...query, id: randomInt(0, 65536) });
  }

  #matches(query: Packet, reply: DecodedPacket): boolean {
    const q = query.questions![0];
    const r = reply.questions?.[0];
    return reply.type === 'response' && reply.id === query.id && !!r && r.type === q.type && r.name.toLowerCase() === q.name.toLowerCase();
  }

  #udp(server: Server, query: Packet): Promise<DecodedPacket> {
    return new Promise((resolve, reject) => {
      const socket = dgram.createSocket(server.family === 6 ? 'udp6' : 'udp4');
      const finish = (error: Error | null, reply?: DecodedPacket) => {
        clearTimeout(timer);
        socket.close();
        if (error) reject(error);
        else resolve(reply!);
      };
      const timer = setTimeout(() => finish(new DnsQueryError('ETIMEOUT', `no reply from ${server.host} within ${this.#timeoutMs} ms`)), this.#timeoutMs);
      socket.on('error', (error) => finish(error));
      socket.on('message', (message, remote) => {
        if (remote.address !== server.host || remote.port !== server.port) return;
        let reply: DecodedPacket;
        try {
          reply = dnsPacket.decode(message);
        } catch {
          return; // not an answer to us: keep waiting
        }
        if (this.#matches(query, reply)) finish(null, reply);
      });
      socket.send(dnsPacket.encode(query), server.port, server.host, (error) => {
        if (error) finish(error);
      });
    });
  }

  #tcp(server: Server, query: Packet): Promise<DecodedPacket> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ host: server.host, port: server.port });
      let pending = Buffer.alloc(0);
      const finish = (error: Error | null, reply?: DecodedPacket) => {
        clearTimeout(timer);
        socket.destroy();
        if (error) reject(error);
        else resolve(reply!);
      };
      const timer = setTimeout(() => finish(new DnsQueryError('ETIMEOUT', `no TCP reply from ${server.host} within ${this.#timeoutMs} ms`)), this.#timeoutMs);
      socket.on('error', (error) => finish(error));
      socket.on('connect', () => socket.write(dnsPacket.streamEncode(query)));
      socket.on('data', (chunk) => {
        pending = Buffer.concat([pending, chunk]);
        // Two bytes of length, then the message (RFC 1035 4.2.2); 64 KiB at most by construction.
        if (pending.length < 2 || pending.length < 2 + pending.readUInt16BE(0)) return;
        try {
          const reply = dnsPacket.decode(pending.subarray(2, 2 + pending.readUInt16BE(0)));
          if (this.#matches(query, reply)) finish(null, reply);
          else finish(new DnsQueryError('EBADRESP', `mismatched TCP reply from ${server.host}`));
        } catch (error) {
          finish(new DnsQueryError('EBADRESP', `unreadable TCP reply from ${server.host}: ${(error as Error).message}`));
        }
      });
      socket.on('end', () => finish(new DnsQueryError('ECONNREFUSED', `${server.host} closed the TCP connection without a reply`)));
    });
  }
}
