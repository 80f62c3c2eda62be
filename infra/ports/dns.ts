// The DNS port: asks about records through the resolvers Relay is configured with
// (RELAY_DNS_SERVERS). infra/dns/resolver.ts is the node:dns implementation; tests point it at
// a DNS server they start (test/support/dns-server.ts).
import type { DnsAnswer, DnsQuestion } from '../../domain/sending-domain.ts';

/**
 * Implementations report every outcome, failures included, as a DnsAnswer and do not reject:
 * one unreachable name must not hide what the others say. The questions are the records' own
 * (TXT, MX) and the addresses (A, AAAA) an SPF record's terms name.
 */
export interface DnsLookup {
  lookupRecords(records: ReadonlyArray<DnsQuestion>): Promise<DnsAnswer[]>;
}
