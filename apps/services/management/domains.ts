// Sending domains: created with a fresh DKIM key, verified against real DNS, and connected
// to the projects of their workspace that may send from them. Only verified domains can be
// connected; admission (apps/services/admission.ts) sends only from domains that are both.
import { RelayError, conflict, notFound, validationError } from '../../../domain/errors.ts';
import { MAIL_FROM_SUBDOMAIN, statusAfterCheck, type SendingDomain } from '../../../domain/management.ts';
import {
  SendingDomainInputError, normalizeDomainName, requiredRecords, splitTxtValue, type DnsRecord, type RecordCheck, type SendingDomainSettings,
} from '../../../domain/sending-domain.ts';
import type { RelayConfig } from '../../../infra/config.ts';
import { generateDkimKeyPair } from '../../../infra/dns/dkim-keys.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { sealDkimKey } from '../dkim-key-vault.ts';
import { verifySendingDomain } from '../../../infra/dns/verify-domain.ts';
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

export interface DomainView {
  id: string;
  workspaceId: string;
  name: string;
  status: SendingDomain['status'];
  dkimSelector: string;
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

export const recordsOf = (domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): DnsRecord[] => requiredRecords(settingsOf(domain, config));

export function domainView(domain: SendingDomain, config: Pick<RelayConfig, 'mailHost'>): DomainView {
  return {
    id: domain._id,
    workspaceId: domain.workspaceId,
    name: domain.name,
    status: domain.status,
    dkimSelector: domain.dkimSelector,
    mailFromDomain: `${domain.mailFromSubdomain}.${domain.name}`,
    records: recordsOf(domain, config).map((r) => (r.type === 'TXT' ? { ...r, txtStrings: splitTxtValue(r.value) } : r)),
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

export async function createDomain(
  documents: DocumentStore,
  input: { workspaceId: string; name: string },
  now: Date,
  secrets: SecretBox,
): Promise<SendingDomain> {
  const name = normalizeSendingDomainName(input.name);
  const taken = () => conflict(`the domain ${name} already exists in this workspace`);
  // Checked first only to spare a key generation; the unique index is what decides a race.
  if (await findDomainByName(documents, input.workspaceId, name)) throw taken();
  const key = await generateDkimKeyPair({ now });
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

/** Asks DNS (through `lookup`) and stores the outcome: status, per-record checks, time of the check. */
export async function verifyDomain(
  documents: DocumentStore,
  config: Pick<RelayConfig, 'mailHost'>,
  lookup: DnsLookup,
  domainId: string,
  now: Date,
): Promise<SendingDomain> {
  const domain = await domainsOf(documents).get(domainId);
  if (!domain) throw notFound(`domain ${domainId} not found`);
  const { checks, verified } = await verifySendingDomain(settingsOf(domain, config), lookup);
  const at = now.toISOString();
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) => {
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
    };
  });
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
