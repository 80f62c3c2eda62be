// Checks a sending domain's DNS against the records Relay asked its owner to publish.
import { SPF_LOOKUP_LIMIT, dkimRecord, dmarcLookupsNeeded, evaluateVerification, requiredRecords, spfLookupsNeeded } from '../../domain/sending-domain.ts';
import type { RecordCheck, SendingDomainSettings, VerificationOptions, VerificationResult } from '../../domain/sending-domain.ts';
import type { DnsLookup } from '../ports/dns.ts';
import { organizationalDomain } from './organizational-domain.ts';

const OPTIONS: VerificationOptions = { organizationalDomain };

export async function verifySendingDomain(settings: SendingDomainSettings, lookup: DnsLookup): Promise<VerificationResult> {
  const records = requiredRecords(settings);
  const answers = await lookup.lookupRecords(records);
  // Each round looks up what the answers so far lead to: for the SPF record, the records its
  // include: and redirect= lead to next and the names its a, mx and exists terms ask about on
  // the way (void lookups); for a domain without a DMARC record, its organizational domain's.
  // The rule never follows more than SPF_LOOKUP_LIMIT records, nor asks about more than that many
  // terms, and a round asks for every name a walk meets up to the next record it opens; the
  // bound also ends the rounds when a lookup answers for other names than asked (a record still
  // unanswered is judged an error).
  for (let round = 0; round < SPF_LOOKUP_LIMIT; round++) {
    const needed = [...spfLookupsNeeded(records, answers), ...dmarcLookupsNeeded(records, answers, OPTIONS)];
    if (needed.length === 0) break;
    answers.push(...(await lookup.lookupRecords(needed)));
  }
  return evaluateVerification(records, answers, OPTIONS);
}

/** Checks one DKIM key's record (a rotation's new key) the way verifySendingDomain checks the active one's. */
export async function checkDkimRecord(domain: string, selector: string, publicKeyBase64: string, lookup: DnsLookup): Promise<RecordCheck> {
  const record = dkimRecord(domain, selector, publicKeyBase64);
  return evaluateVerification([record], await lookup.lookupRecords([record])).checks[0];
}
