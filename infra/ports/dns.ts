// The DNS port: asks about records through the resolvers Relay is configured with
// (RELAY_DNS_SERVERS). infra/dns/resolver.ts is the node:dns implementation; tests point it at
// a DNS server they start (test/support/dns-server.ts).
import type { DnsAnswer, DnsRecord } from '../../domain/sending-domain.ts';

/**
 * Implementations report every outcome, failures included, as a DnsAnswer and do not reject:
 * one unreachable name must not hide what the others say.
 */
export interface DnsLookup {
  lookupRecords(records: ReadonlyArray<Pick<DnsRecord, 'name' | 'type'>>): Promise<DnsAnswer[]>;
}
