// Sending domains: created with a fresh DKIM key, verified against real DNS, and connected
// to the projects of their workspace that may send from them. Only verified domains can be
// connected; admission (apps/services/admission.ts) sends only from domains that are both.
import { afterRotationCheck, rotationCheckDue } from '../../../domain/dkim-rotation.ts';
import { afterRecheck, isRechecked, recheckDue, recheckVerdict, type RecheckOutcome, type RecheckPolicy, type RecheckVerdict } from '../../../domain/domain-recheck.ts';
import { RelayError, conflict, notFound, validationError } from '../../../domain/errors.ts';
import { MAIL_FROM_SUBDOMAIN, statusAfterCheck, type SendingDomain } from '../../../domain/management.ts';
import {
  SendingDomainInputError, checkRecordNamesFit, dkimRecord, normalizeDomainName, requiredRecords, splitTxtValue, type DnsRecord, type RecordCheck, type SendingDomainSettings,
} from '../../../domain/sending-domain.ts';
import type { RelayConfig } from '../../../infra/config.ts';
import { KeyGenerationBusyError, generateDkimKeyPairOnThread, newDkimSelector, type DkimKeyPair } from '../../../infra/dns/dkim-keys.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { sealDkimKey } from '../dkim-key-vault.ts';
import { checkDkimRecord, verifySendingDomain } from '../../../infra/dns/verify-domain.ts';
import type { DnsLookup } from '../../../infra/ports/dns.ts';
import { DuplicateKeyError, type DocumentStore } from '../../../infra/ports/document-store.ts';
import { COLLECTIONS } from '../collections.ts';
import { updateDocument } from './documents.ts';
import { newId } from './ids.ts';
import { projectsOf } from './projects.ts';
import { managementChanged } from './reused-reads.ts';

export const domainsOf = (documents: DocumentStore) => documents.collection<SendingDomain>(COLLECTIONS.domains);

export type DomainRecordView = DnsRecord & {
  /** TXT only: the value cut in the ≤255-character strings one TXT record is published as. */
  txtStrings?: string[];
};

export interface DkimRotationView {
  /** The new key's selector; mail is signed with the active one (dkimSelector) until the rotation completes. */
  selector: string;
  /** The TXT record to publish beside the active key's. */
  record: DomainRecordView | null;
  startedAt: string;
  /** The last DNS check of that record (by a verify), null before the first. */
  check: RecordCheck | null;
  checkedAt: string | null;
}

export interface RetiredDkimKeyView {
  selector: string;
  /** Where its record was published: it may stay there a few days for messages signed before the switch, then be removed. */
  recordName: string;
  retiredAt: string;
}

export interface DomainView {
  id: string;
  workspaceId: string;
  name: string;
  status: SendingDomain['status'];
  dkimSelector: string;
  dkimRotation: DkimRotationView | null;
  retiredDkimKeys: RetiredDkimKeyView[];
  mailFromDomain: string;
  records: DomainRecordView[];
  checks: RecordCheck[] | null;
  lastCheckedAt: string | null;
  verifiedAt: string | null;
  verifiedBy: SendingDomain['verifiedBy'];
  operatorNote: string | null;
  projectIds: string[];
  createdAt: string;
}

const settingsOf = (domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): SendingDomainSettings => ({
  domain: domain.name,
  dkimSelector: domain.dkimSelector,
  dkimPublicKeyBase64: domain.dkimPublicKeyBase64,
  mailFromSubdomain: domain.mailFromSubdomain,
  mxHost: config.mailHost,
});

/** The records to publish; a stored domain whose records cannot be built (see shownRecords) is a 400, never a 500. */
export function recordsOf(domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): DnsRecord[] {
  try {
    return requiredRecords(settingsOf(domain, config));
  } catch (error) {
    if (error instanceof SendingDomainInputError) throw validationError(`the records of the domain ${domain.name} cannot be built: ${error.message}`);
    throw error;
  }
}

/**
 * The records a view shows: none when they cannot be built. createDomain refuses names too long
 * for their records, but a domain stored before it did (or a mail host changed since) must not
 * make the view throw, or one such domain would break its whole workspace's list.
 */
function shownRecords(domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): DomainRecordView[] {
  let records: DnsRecord[];
  try {
    records = requiredRecords(settingsOf(domain, config));
  } catch (error) {
    if (error instanceof SendingDomainInputError) return [];
    throw error;
  }
  return records.map((r) => (r.type === 'TXT' ? { ...r, txtStrings: splitTxtValue(r.value) } : r));
}

/** The pending key's record as shown; null when it cannot be built (as shownRecords). */
function shownRotationRecord(domain: SendingDomain, selector: string, publicKeyBase64: string): DomainRecordView | null {
  try {
    const record = dkimRecord(domain.name, selector, publicKeyBase64);
    return { ...record, txtStrings: splitTxtValue(record.value) };
  } catch (error) {
    if (error instanceof SendingDomainInputError) return null;
    throw error;
  }
}

function rotationView(domain: SendingDomain): DkimRotationView | null {
  const pending = domain.dkimRotation;
  if (!pending) return null;
  return {
    selector: pending.selector,
    record: shownRotationRecord(domain, pending.selector, pending.publicKeyBase64),
    startedAt: pending.startedAt,
    check: pending.check,
    checkedAt: pending.checkedAt,
  };
}

export function domainView(domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): DomainView {
  return {
    id: domain._id,
    workspaceId: domain.workspaceId,
    name: domain.name,
    status: domain.status,
    dkimSelector: domain.dkimSelector,
    dkimRotation: rotationView(domain),
    retiredDkimKeys: (domain.dkimRetiredKeys ?? []).map((key) => ({
      selector: key.selector, recordName: `${key.selector}._domainkey.${domain.name}`, retiredAt: key.retiredAt,
    })),
    mailFromDomain: `${domain.mailFromSubdomain}.${domain.name}`,
    records: shownRecords(domain, config),
    checks: domain.checks,
    lastCheckedAt: domain.lastCheckedAt,
    verifiedAt: domain.verifiedAt,
    verifiedBy: domain.verifiedBy,
    operatorNote: domain.operatorNote,
    projectIds: domain.projectIds,
    createdAt: domain.createdAt,
  };
}

export function normalizeSendingDomainName(input: string, field = 'body.name'): string {
  try {
    return normalizeDomainName(input, field);
  } catch (error) {
    if (error instanceof SendingDomainInputError) throw validationError(error.message);
    throw error;
  }
}

export async function findDomainByName(documents: DocumentStore, workspaceId: string, name: string): Promise<SendingDomain | null> {
  const [domain] = await domainsOf(documents).find({ where: { workspaceId, name: normalizeSendingDomainName(name) }, limit: 1 });
  return domain ?? null;
}

function checkRecordNames(name: string, selector: string, field: string): void {
  try {
    checkRecordNamesFit(name, selector, MAIL_FROM_SUBDOMAIN, field);
  } catch (error) {
    if (error instanceof SendingDomainInputError) throw validationError(error.message);
    throw error;
  }
}

/**
 * The name createDomain would store `input` under, or its refusal (400), with no key made and
 * nothing stored, so a caller can refuse a name before any write of its own. The record names
 * built from the domain (<selector>._domainkey.<domain>, bounce.<domain>) must be DNS names too;
 * every selector newDkimSelector makes has the same length as the key's.
 */
export function newSendingDomainName(input: string, now: Date, field = 'body.name'): string {
  const name = normalizeSendingDomainName(input, field);
  checkRecordNames(name, newDkimSelector(now), field);
  return name;
}

/**
 * A new DKIM key, made on the key thread in the workspace's turn (infra/dns/dkim-keys.ts); 503,
 * retry in 1 second, while that thread has as many waiting as it takes.
 */
export async function newDkimKey(workspaceId: string, now: Date): Promise<DkimKeyPair> {
  try {
    return await generateDkimKeyPairOnThread(workspaceId, { now });
  } catch (error) {
    if (error instanceof KeyGenerationBusyError) throw new RelayError('service_unavailable', 'DKIM key generation is busy: retry in 1 second', { retryAfterSeconds: 1 });
    throw error;
  }
}

export async function createDomain(
  documents: DocumentStore,
  input: { workspaceId: string; name: string },
  now: Date,
  secrets: SecretBox,
): Promise<SendingDomain> {
  const name = newSendingDomainName(input.name, now);
  const taken = () => conflict(`the domain ${name} already exists in this workspace`);
  // Checked first only to spare a key generation; the unique index is what decides a race.
  if (await findDomainByName(documents, input.workspaceId, name)) throw taken();
  const key = await newDkimKey(input.workspaceId, now);
  checkRecordNames(name, key.selector, 'body.name');
  const domain: SendingDomain = {
    _id: newId('dom'),
    workspaceId: input.workspaceId,
    name,
    dkimSelector: key.selector,
    dkimPublicKeyBase64: key.publicKeyBase64,
    dkimPrivateKeySealed: sealDkimKey(secrets, key.privateKeyPem),
    mailFromSubdomain: MAIL_FROM_SUBDOMAIN,
    status: 'pending',
    checks: null,
    lastCheckedAt: null,
    verifiedAt: null,
    verifiedBy: null,
    operatorNote: null,
    projectIds: [],
    createdAt: now.toISOString(),
  };
  try {
    return await domainsOf(documents).insert(domain);
  } catch (error) {
    if (error instanceof DuplicateKeyError) throw taken();
    throw error;
  } finally {
    // A send that found no such domain must find this one.
    managementChanged();
  }
}

export async function listDomains(documents: DocumentStore, workspaceId: string): Promise<SendingDomain[]> {
  return domainsOf(documents).find({ where: { workspaceId }, orderBy: [['workspaceId', 'asc'], ['name', 'asc']] });
}

/**
 * Asks DNS (through `lookup`) and stores the outcome: status, per-record checks, time of the
 * check. A pending DKIM rotation's record is checked too; found, the rotation completes
 * (domain/dkim-rotation.ts) and the new key's check stands for DKIM among the domain's checks.
 */
export async function verifyDomain(
  documents: DocumentStore,
  config: Pick<RelayConfig, 'mailHost'>,
  lookup: DnsLookup,
  domainId: string,
  now: Date,
): Promise<SendingDomain> {
  const domain = await domainsOf(documents).get(domainId);
  if (!domain) throw notFound(`domain ${domainId} not found`);
  recordsOf(domain, config); // a domain whose records cannot be built is a 400 here, not a 500 from the verifier
  const pending = domain.dkimRotation ?? null;
  const [active, pendingCheck] = await Promise.all([
    verifySendingDomain(settingsOf(domain, config), lookup),
    pending && shownRotationRecord(domain, pending.selector, pending.publicKeyBase64)
      ? checkDkimRecord(domain.name, pending.selector, pending.publicKeyBase64, lookup)
      : null,
  ]);
  const at = now.toISOString();
  return updateDocument(domainsOf(documents), domainId, 'domain', (stored) => {
    let current = stored;
    // The rotation checked is still the one pending: the same key, not one started under the same
    // selector after a cancel meanwhile, whose record this check did not see.
    const sameKey = pending !== null && current.dkimRotation?.selector === pending.selector && current.dkimRotation.publicKeyBase64 === pending.publicKeyBase64;
    if (pending && pendingCheck && sameKey) current = afterRotationCheck(current, pendingCheck, now);
    let checks: RecordCheck[];
    if (current.dkimSelector === domain.dkimSelector) checks = active.checks;
    else if (pendingCheck && current.dkimSelector === pending?.selector && current.dkimPublicKeyBase64 === pending.publicKeyBase64) {
      checks = active.checks.map((c) => (c.purpose === 'dkim' ? pendingCheck : c));
    }
    else return null; // the active key changed meanwhile to one this check did not ask DNS about
    const verified = checks.every((c) => !c.required || c.status === 'ok');
    const status = statusAfterCheck(current, checks);
    const seen = verified && !(current.status === 'verified' && current.verifiedBy === 'dns');
    return {
      ...current,
      status,
      checks,
      lastCheckedAt: at,
      verifiedAt: seen ? at : status === 'verified' ? current.verifiedAt : null,
      verifiedBy: verified ? 'dns' : status === 'verified' ? current.verifiedBy : null,
      operatorNote: verified ? null : current.operatorNote,
      // A passing check ends a run of wrong re-checks; one that failed a lookup says nothing.
      recheckFailingSince: status === 'verified' && !verified ? current.recheckFailingSince ?? null : null,
    };
  });
}

export interface RecheckResult {
  domain: Pick<SendingDomain, '_id' | 'workspaceId' | 'name'>;
  verdict: RecheckVerdict;
  outcome: RecheckOutcome;
  /** The required records found missing or wrong. */
  wrong: Array<{ purpose: string; name: string; type: string; status: string }>;
}

/**
 * The periodic re-check of one DNS-verified domain (domain/domain-recheck.ts): claims it, asks
 * DNS, and stores the checks and lastCheckedAt as verifyDomain does, with the status the
 * re-check rule gives. Several processes may run it at once: the claim (a compare-and-set)
 * lets one of them ask DNS, and the outcome is stored only while that claim holds and no
 * other check was stored meanwhile, so none is counted twice or written over. Null when the
 * domain was not due (any more), or its records cannot be built (it was stored before
 * createDomain refused such names: no check can say anything of it).
 */
export async function recheckDomain(
  documents: DocumentStore,
  config: Pick<RelayConfig, 'mailHost'>,
  lookup: DnsLookup,
  domainId: string,
  policy: RecheckPolicy,
  now: Date,
): Promise<RecheckResult | null> {
  const at = now.toISOString();
  let claimed = false as boolean;
  const taken = await updateDomainIfThere(documents, domainId, (current) => {
    claimed = recheckDue(current, now, policy) && shownRecords(current, config).length > 0;
    return claimed ? { ...current, recheckClaimedAt: at } : null;
  });
  if (taken === null || !claimed) return null;
  const { checks } = await verifySendingDomain(settingsOf(taken, config), lookup);
  const verdict = recheckVerdict(checks);
  let outcome = null as RecheckOutcome | null;
  const stored = await updateDomainIfThere(documents, domainId, (current) => {
    outcome = null;
    // A check was stored since the claim (a manual one: as fresh as ours), the claim lapsed and
    // another process took the domain, an operator vouched for it, or a rotation replaced the key
    // that was checked: nothing to store.
    if (current.recheckClaimedAt !== at || current.lastCheckedAt !== taken.lastCheckedAt || !isRechecked(current) || current.dkimSelector !== taken.dkimSelector) return null;
    outcome = afterRecheck(current, verdict, now, policy);
    const verified = outcome.status === 'verified';
    return {
      ...current,
      status: outcome.status,
      checks,
      lastCheckedAt: at,
      verifiedAt: verified ? current.verifiedAt : null,
      verifiedBy: verified ? current.verifiedBy : null,
      recheckFailingSince: outcome.failingSince,
      recheckClaimedAt: null,
    };
  });
  if (stored === null || outcome === null) return null;
  return {
    domain: { _id: stored._id, workspaceId: stored.workspaceId, name: stored.name },
    verdict,
    outcome,
    wrong: checks.filter((c) => c.required && (c.status === 'missing' || c.status === 'mismatch'))
      .map(({ purpose, name, type, status }) => ({ purpose, name, type, status })),
  };
}

export interface RotationCheckResult {
  domain: Pick<SendingDomain, '_id' | 'workspaceId' | 'name'>;
  /** Completed: the new key signs now, under `selector`; the one it replaced is retired. */
  completed: boolean;
  selector: string;
  retiredSelector: string;
}

/**
 * The re-check pass's look at one domain's pending DKIM rotation (domain/dkim-rotation.ts
 * rotationCheckDue): asks DNS for the new key's record and stores what it found, completing the
 * rotation when the record is there as asked, as a verify would. Only the new record is asked
 * for and only the DKIM check changes: the domain's status is the re-check's and a verify's to
 * say. Null when the domain is gone, no rotation is due, or another check or a cancel came first.
 */
export async function checkPendingRotation(documents: DocumentStore, lookup: DnsLookup, domainId: string, now: Date): Promise<RotationCheckResult | null> {
  const domain = await domainsOf(documents).get(domainId);
  const pending = domain?.dkimRotation ?? null;
  if (!domain || !pending || !rotationCheckDue(domain, now) || !shownRotationRecord(domain, pending.selector, pending.publicKeyBase64)) return null;
  const check = await checkDkimRecord(domain.name, pending.selector, pending.publicKeyBase64, lookup);
  let result = null as RotationCheckResult | null;
  await updateDomainIfThere(documents, domainId, (current) => {
    result = null;
    const sameKey = current.dkimRotation?.selector === pending.selector && current.dkimRotation.publicKeyBase64 === pending.publicKeyBase64;
    if (!sameKey || current.dkimRotation!.checkedAt !== pending.checkedAt) return null;
    const next = afterRotationCheck(current, check, now);
    const completed = next.dkimRotation === null;
    result = { domain: { _id: current._id, workspaceId: current.workspaceId, name: current.name }, completed, selector: pending.selector, retiredSelector: current.dkimSelector };
    return completed ? { ...next, checks: current.checks?.map((c) => (c.purpose === 'dkim' ? check : c)) ?? null } : next;
  });
  return result;
}

/** updateDocument, or null when the domain is gone. */
async function updateDomainIfThere(documents: DocumentStore, domainId: string, change: (current: SendingDomain) => SendingDomain | null): Promise<SendingDomain | null> {
  try {
    return await updateDocument(domainsOf(documents), domainId, 'domain', change);
  } catch (error) {
    if (error instanceof RelayError && error.code === 'not_found') return null;
    throw error;
  }
}

/** The operator's override for domains DNS cannot show (local and test setups); the reason is kept. */
export async function markDomainVerified(documents: DocumentStore, domainId: string, reason: string, now: Date): Promise<SendingDomain> {
  const note = reason.trim();
  if (note.length === 0) throw validationError('a reason is required to mark a domain verified');
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) => ({
    ...current,
    status: 'verified',
    verifiedAt: now.toISOString(),
    verifiedBy: 'operator',
    operatorNote: note.slice(0, 500),
    recheckFailingSince: null,
  }));
}

export async function connectDomain(documents: DocumentStore, domainId: string, projectId: string): Promise<SendingDomain> {
  const domain = await domainsOf(documents).get(domainId);
  if (!domain) throw notFound(`domain ${domainId} not found`);
  const project = await projectsOf(documents).get(projectId);
  if (!project || project.workspaceId !== domain.workspaceId) throw notFound(`project ${projectId} not found in the domain's workspace`);
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) => {
    if (current.status !== 'verified') {
      throw new RelayError('domain_not_verified', `the domain ${current.name} is ${current.status}; verify it before connecting it to a project`);
    }
    return current.projectIds.includes(projectId) ? null : { ...current, projectIds: [...current.projectIds, projectId] };
  });
}

export async function disconnectDomain(documents: DocumentStore, domainId: string, projectId: string): Promise<SendingDomain> {
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) =>
    current.projectIds.includes(projectId) ? { ...current, projectIds: current.projectIds.filter((p) => p !== projectId) } : null,
  );
}
