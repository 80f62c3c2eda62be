// Starting and cancelling a sending domain's DKIM key rotation (the rule: domain/dkim-rotation.ts).
// A rotation completes in verifyDomain (./domains.ts), once DNS shows the new key's record.
import { cancelDkimRotation, checkRotationMayStart, startDkimRotation } from '../../../domain/dkim-rotation.ts';
import { notFound, validationError } from '../../../domain/errors.ts';
import type { SendingDomain } from '../../../domain/management.ts';
import { SendingDomainInputError, checkRecordNamesFit, normalizeDkimSelector } from '../../../domain/sending-domain.ts';
import { generateDkimKeyPair, newDkimSelector } from '../../../infra/dns/dkim-keys.ts';
import type { DocumentStore } from '../../../infra/ports/document-store.ts';
import type { SecretBox } from '../../../infra/secrets/secret-box.ts';
import { sealDkimKey } from '../dkim-key-vault.ts';
import { updateDocument } from './documents.ts';
import { domainsOf } from './domains.ts';

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

/** Makes and seals a new key under a new selector and stores it as pending; the active key signs on. */
export async function startDomainDkimRotation(documents: DocumentStore, input: StartRotationInput, now: Date, secrets: SecretBox): Promise<SendingDomain> {
  const field = input.selectorField ?? 'selector';
  const domain = await domainsOf(documents).get(input.domainId);
  if (!domain) throw notFound(`domain ${input.domainId} not found`);
  const selector = input.selector === undefined ? newDkimSelector(now) : inputError(() => normalizeDkimSelector(input.selector!, field));
  inputError(() => checkRecordNamesFit(domain.name, selector, domain.mailFromSubdomain, field));
  // Checked first only to spare a key generation; the compare-and-set below decides a race.
  checkRotationMayStart(domain, selector);
  const key = await generateDkimKeyPair({ now });
  const privateKeySealed = sealDkimKey(secrets, key.privateKeyPem);
  return updateDocument(domainsOf(documents), domain._id, 'domain', (current) =>
    startDkimRotation(current, { selector, publicKeyBase64: key.publicKeyBase64, privateKeySealed }, now));
}

/** Drops the pending key; 404 when no rotation is pending. */
export async function cancelDomainDkimRotation(documents: DocumentStore, domainId: string): Promise<SendingDomain> {
  return updateDocument(domainsOf(documents), domainId, 'domain', (current) => cancelDkimRotation(current));
}
