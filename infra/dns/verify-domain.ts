// Checks a sending domain's DNS against the records Relay asked its owner to publish.
import { evaluateVerification, requiredRecords } from '../../domain/sending-domain.ts';
import type { SendingDomainSettings, VerificationResult } from '../../domain/sending-domain.ts';
import type { DnsLookup } from '../ports/dns.ts';

export async function verifySendingDomain(settings: SendingDomainSettings, lookup: DnsLookup): Promise<VerificationResult> {
  const records = requiredRecords(settings);
  return evaluateVerification(records, await lookup.lookupRecords(records));
}
