// DNS answers for the MX transport, cached by their TTL: MX, A/AAAA, the MTA-STS and TLS-RPT
// TXT records and TLSA. Without it every message cost an MX and two address queries.
//
// - Positive answers live for the smallest TTL among their records (capped at maxTtlSeconds).
// - Negative answers (NXDOMAIN, or a name without records of the type) live for the SOA's
//   negative TTL, min(SOA TTL, SOA MINIMUM) (RFC 2308 5), capped at maxNegativeTtlSeconds; an
//   answer without an SOA is not cached.
// - Failures (timeout, SERVFAIL) are not cached; concurrent questions for the same name and
//   type share one query, so a burst of messages to a failing domain asks once.
// - Bounded in entries and in bytes: the least recently stored entries go first.
import type { Answer, RecordType, TlsaData } from 'dns-packet';
import type { StubResolver } from './stub-resolver.ts';

export interface DnsAnswerBase {
  /** The resolver set the AD bit: DNSSEC-secure, as far as a validating resolver can tell. */
  authenticated: boolean;
}

export type DnsLookup<T> = DnsAnswerBase & ({ kind: 'answer'; records: T[] } | { kind: 'nxdomain' } | { kind: 'nodata' });

export interface MxRecord {
  exchange: string;
  priority: number;
}

export interface DnsCacheOptions {
  now?: () => number;
  /** Default 10,000. */
  maxEntries?: number;
  /** Default 8 MiB (an estimate of the records' size). */
  maxBytes?: number;
  /** Default 1 day. */
  maxTtlSeconds?: number;
  /** Default 1 hour. */
  maxNegativeTtlSeconds?: number;
}

interface Entry {
  value: DnsLookup<Answer>;
  expiresAt: number;
  bytes: number;
}

export interface DnsCacheStats {
  hits: number;
  /** Questions sent to the resolver (coalesced ones counted once). */
  queries: number;
  entries: number;
}

function sizeOf(records: Answer[]): number {
  let bytes = 64;
  for (const record of records) {
    const data = (record as { data?: unknown }).data;
    bytes += 48 + record.name.length + (typeof data === 'string' ? data.length : Buffer.isBuffer(data) ? data.length : JSON.stringify(data ?? '').length);
  }
  return bytes;
}

/** Each TXT record of an answer as one string: its character-strings joined (RFC 7208 3.3, RFC 8461 3.1). */
export function txtStrings(records: readonly Answer[]): string[] {
  return records.flatMap((r) => {
    if (r.type !== 'TXT') return [];
    const parts = Array.isArray(r.data) ? r.data : [r.data];
    return [parts.map((p) => (Buffer.isBuffer(p) ? p.toString('utf8') : p)).join('')];
  });
}

export class DnsCache {
  readonly #resolver: StubResolver;
  readonly #now: () => number;
  readonly #maxEntries: number;
  readonly #maxBytes: number;
  readonly #maxTtl: number;
  readonly #maxNegativeTtl: number;
  readonly #entries = new Map<string, Entry>();
  readonly #inFlight = new Map<string, Promise<DnsLookup<Answer>>>();
  #bytes = 0;
  #hits = 0;
  #queries = 0;

  constructor(resolver: StubResolver, options: DnsCacheOptions = {}) {
    this.#resolver = resolver;
    this.#now = options.now ?? Date.now;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxBytes = options.maxBytes ?? 8 * 1024 * 1024;
    this.#maxTtl = options.maxTtlSeconds ?? 86_400;
    this.#maxNegativeTtl = options.maxNegativeTtlSeconds ?? 3600;
  }

  get stats(): DnsCacheStats {
    return { hits: this.#hits, queries: this.#queries, entries: this.#entries.size };
  }

  /** Whether answers can be authenticated at all (the resolver is asked with DO). */
  get dnssec(): boolean {
    return this.#resolver.dnssec;
  }

  /** The records of `type` at `name`; throws DnsQueryError when no answer could be had. */
  async lookup(name: string, type: RecordType): Promise<DnsLookup<Answer>> {
    const key = `${type} ${name.toLowerCase().replace(/\.$/, '')}`;
    const cached = this.#entries.get(key);
    if (cached) {
      if (cached.expiresAt > this.#now()) {
        this.#hits++;
        return cached.value;
      }
      this.#forget(key, cached);
    }
    const running = this.#inFlight.get(key);
    if (running) {
      this.#hits++;
      return running;
    }
    this.#queries++;
    const query = this.#ask(key, name, type).finally(() => this.#inFlight.delete(key));
    this.#inFlight.set(key, query);
    return query;
  }

  async #ask(key: string, name: string, type: RecordType): Promise<DnsLookup<Answer>> {
    const response = await this.#resolver.query(name, type);
    const records = response.answers.filter((a) => a.type === type);
    let value: DnsLookup<Answer>;
    let ttl: number;
    if (response.rcode === 'NOERROR' && records.length > 0) {
      value = { kind: 'answer', records, authenticated: response.authenticated };
      // A CNAME on the way is part of the answer: it expires with it.
      const chain = response.answers.filter((a) => a.type === type || a.type === 'CNAME');
      ttl = Math.min(this.#maxTtl, ...chain.map((a) => (a as { ttl?: number }).ttl ?? 0));
    } else {
      value = { kind: response.rcode === 'NXDOMAIN' ? 'nxdomain' : 'nodata', authenticated: response.authenticated };
      const soa = response.authorities.find((a) => a.type === 'SOA');
      ttl = soa && soa.type === 'SOA' ? Math.min(this.#maxNegativeTtl, (soa as { ttl?: number }).ttl ?? 0, soa.data.minimum ?? 0) : 0;
    }
    if (ttl > 0) this.#store(key, { value, expiresAt: this.#now() + ttl * 1000, bytes: value.kind === 'answer' ? sizeOf(value.records) : 64 });
    return value;
  }

  #store(key: string, entry: Entry): void {
    const old = this.#entries.get(key);
    if (old) this.#forget(key, old);
    this.#entries.set(key, entry);
    this.#bytes += entry.bytes;
    for (const [oldest, held] of this.#entries) {
      if (this.#entries.size <= this.#maxEntries && this.#bytes <= this.#maxBytes) break;
      this.#forget(oldest, held);
    }
  }

  #forget(key: string, entry: Entry): void {
    this.#entries.delete(key);
    this.#bytes -= entry.bytes;
  }

  async mx(name: string): Promise<DnsLookup<MxRecord>> {
    const found = await this.lookup(name, 'MX');
    if (found.kind !== 'answer') return found;
    const records = found.records.flatMap((r) => (r.type === 'MX' ? [{ exchange: r.data.exchange.replace(/\.$/, ''), priority: r.data.preference ?? 0 }] : []));
    return { ...found, records };
  }

  async addresses(name: string, family: 4 | 6): Promise<DnsLookup<string>> {
    const found = await this.lookup(name, family === 4 ? 'A' : 'AAAA');
    if (found.kind !== 'answer') return found;
    return { ...found, records: found.records.flatMap((r) => (r.type === 'A' || r.type === 'AAAA' ? [r.data] : [])) };
  }

  /** TXT records, each one's character-strings joined (RFC 7208 3.3, RFC 8461 3.1). */
  async txt(name: string): Promise<DnsLookup<string>> {
    const found = await this.lookup(name, 'TXT');
    if (found.kind !== 'answer') return found;
    return { ...found, records: txtStrings(found.records) };
  }

  async tlsa(name: string): Promise<DnsLookup<TlsaData>> {
    const found = await this.lookup(name, 'TLSA');
    if (found.kind !== 'answer') return found;
    return { ...found, records: found.records.flatMap((r) => (r.type === 'TLSA' ? [r.data] : [])) };
  }
}
