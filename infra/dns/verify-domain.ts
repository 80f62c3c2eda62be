// Checks a sending domain's DNS against the records Relay asked its owner to publish.
import { evaluateVerification, requiredRecords } from '../../domain/sending-domain.ts';
import type { DnsAnswer, DnsRecord, SendingDomainSettings, VerificationResult } from '../../domain/sending-domain.ts';

/**
 * Port for asking DNS about records. Implementations report every outcome, failures
 * included, as a DnsAnswer and do not reject: one unreachable name must not hide what the
 * others say. infra/dns/resolver.ts is the node:dns implementation.
 */
export interface DnsLookup {
  lookupRecords(records: ReadonlyArray<Pick<DnsRecord, 'name' | 'type'>>): Promise<DnsAnswer[]>;
}

export async function verifySendingDomain(settings: SendingDomainSettings, lookup: DnsLookup): Promise<VerificationResult> {
  const records = requiredRecords(settings);
  return evaluateVerification(records, await lookup.lookupRecords(records));
}
