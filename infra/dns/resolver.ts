// DnsLookup over node:dns (c-ares). Talks to the given servers directly, so verification can
// point at a domain's authoritative servers or a known recursive resolver instead of whatever
// the host uses; c-ares falls back to TCP by itself when an answer is truncated.
import { Resolver } from 'node:dns/promises';
import type { DnsAnswer, DnsQuestionType } from '../../domain/sending-domain.ts';
import type { DnsLookup } from '../ports/dns.ts';

export interface DnsLookupOptions {
  /** Per-attempt timeout in ms. Default 2500. */
  timeoutMs?: number;
  /** Attempts per server before giving up. Default 2. */
  tries?: number;
}

/**
 * @param servers `host`, `host:port`, `[v6]` or `[v6]:port`, IP addresses only. Empty: the
 *   system's resolvers (/etc/resolv.conf).
 */
export function createDnsLookup(servers: string[], options: DnsLookupOptions = {}): DnsLookup {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 2500, tries: options.tries ?? 2 });
  if (servers.length > 0) {
    try {
      resolver.setServers(servers);
    } catch (error) {
      throw new Error(`Invalid DNS server list ${JSON.stringify(servers)}: ${(error as Error).message}`, { cause: error });
    }
  }

  async function lookupOne(name: string, type: DnsQuestionType): Promise<DnsAnswer> {
    try {
      if (type === 'MX') return { name, type, kind: 'answer', mx: (await resolver.resolveMx(name)).map(({ exchange, priority }) => ({ exchange, priority })) };
      if (type === 'A') return { name, type, kind: 'answer', addresses: await resolver.resolve4(name) };
      if (type === 'AAAA') return { name, type, kind: 'answer', addresses: await resolver.resolve6(name) };
      return { name, type, kind: 'answer', txt: await resolver.resolveTxt(name) };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'UNKNOWN';
      // c-ares reports NXDOMAIN as ENOTFOUND and an empty NOERROR answer as ENODATA;
      // everything else (ETIMEOUT, ESERVFAIL, ECONNREFUSED, EREFUSED…) means we do not know.
      if (code === 'ENOTFOUND') return { name, type, kind: 'nxdomain' };
      if (code === 'ENODATA') return { name, type, kind: 'nodata' };
      return { name, type, kind: 'error', code, message: (error as Error).message };
    }
  }

  return {
    async lookupRecords(records) {
      const unique = new Map<string, { name: string; type: DnsQuestionType }>();
      for (const { name, type } of records) unique.set(`${type} ${name.toLowerCase()}`, { name, type });
      return Promise.all([...unique.values()].map(({ name, type }) => lookupOne(name, type)));
    },
  };
}
