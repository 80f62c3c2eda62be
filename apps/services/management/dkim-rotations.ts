// Starting and cancelling a sending domain's DKIM key rotation (the rule: domain/dkim-rotation.ts).
// A rotation completes in verifyDomain (./domains.ts), once DNS shows the new key's record.
//
// A start claims the domain (a compare-and-set) before its key is made, so that concurrent
// starts are refused with 409 at once instead of each making a key only to lose the final write.
// A claim whose process died lapses after CLAIM_LAPSE_MS.
import { randomUUID } from 'node:crypto';
import { cancelDkimRotation, checkRotationMayStart, startDkimRotation } from '../../../domain/dkim-rotation.ts';
import { conflict, notFound, validationError } from '../../../domain/errors.ts';
import type { SendingDomain } from '../../../domain/management.ts';
import { SendingDomainInputError, checkRecordNamesFit, normalizeDkimSelector } from '../../../domain/sending-domain.ts';
import { newDkimSelector } from '../../../infra/dns/dkim-keys.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { sealDkimKey } from '../dkim-key-vault.ts';
import { updateDocument } from './documents.ts';
import { domainsOf, newDkimKey } from './domains.ts';

export interface StartRotationInput {
  domainId: string;
  /** The new key's selector; default a fresh one (infra/dns/dkim-keys.ts newDkimSelector). */
  selector?: string;
  /** How the caller named the selector, for messages ('body.selector', '--selector'). */
  selectorField?: string;
}

function inputError<T>(work: () => T): T {
  try {
    return work();
  } catch (error) {
    if (error instanceof SendingDomainInputError) throw validationError(error.message);
    throw error;
  }
}

/** How long a start's claim holds: far beyond a key's wait and making (seconds), short enough that one left by a dead process does not block for long. */
export const CLAIM_LAPSE_MS = 60_000;

function claimHeld(domain: SendingDomain, now: Date): boolean {
  const claim = domain.dkimRotationClaim;
  // Either way: a claim stamped ahead of `now` (the clock stepped back) lapses too.
  return !!claim && Math.abs(now.getTime() - Date.parse(claim.at)) < CLAIM_LAPSE_MS;
}

/** Makes and seals a new key under a new selector and stores it as pending; the active key signs on. */
export async function startDomainDkimRotation(documents: DocumentStore, input: StartRotationInput, now: Date, secrets: SecretBox): Promise<SendingDomain> {
  const field = input.selectorField ?? 'selector';
  const domains = domainsOf(documents);
  const domain = await domains.get(input.domainId);
  if (!domain) throw notFound(`domain ${input.domainId} not found`);
  const selector = input.selector === undefined ? newDkimSelector(now) : inputError(() => normalizeDkimSelector(input.selector!, field));
  inputError(() => checkRecordNamesFit(domain.name, selector, domain.mailFromSubdomain, field));
  const claim = { id: randomUUID(), at: now.toISOString() };
  const startedElsewhere = () => conflict(`a DKIM key rotation of ${domain.name} is being started by another request`);
  await updateDocument(domains, domain._id, 'domain', (current) => {
    checkRotationMayStart(current, selector);
    if (claimHeld(current, now)) throw startedElsewhere();
    return { ...current, dkimRotationClaim: claim };
  });
  try {
    const key = await newDkimKey(domain.workspaceId, now);
    const privateKeySealed = sealDkimKey(secrets, key.privateKeyPem);
    return await updateDocument(domains, domain._id, 'domain', (current) => {
      // It lapsed and another start took the domain: that one's key is the one to keep.
      if (current.dkimRotationClaim?.id !== claim.id) throw startedElsewhere();
      return startDkimRotation({ ...current, dkimRotationClaim: null }, { selector, publicKeyBase64: key.publicKeyBase64, privateKeySealed }, now);
    });
  } catch (error) {
    await releaseClaim(documents, domain._id, claim.id);
    throw error;
  }
}

/** Drops a start's claim if it is still its own, so that the next start need not wait for it to lapse. */
async function releaseClaim(documents: DocumentStore, domainId: string, claimId: string): Promise<void> {
  await updateDocument(domainsOf(documents), domainId, 'domain', (current) =>
    (current.dkimRotationClaim?.id === claimId ? { ...current, dkimRotationClaim: null } : null)).catch(() => {
    // The domain is gone or the store fails: the claim lapses by itself, and the start's own error is the one to tell.
  });
}

/** Drops the pending key; 404 when no rotation is pending. */
export async function cancelDomainDkimRotation(documents: DocumentStore, domainId: string): Promise<SendingDomain> {
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) => cancelDkimRotation(current));
}
