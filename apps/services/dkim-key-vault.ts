// DKIM private keys at rest: sealed with Relay's secret (infra/secrets/secret-box.ts), so a
// copy of the document store alone signs nothing. Rotation of RELAY_SECRET_KEY keeps old keys
// readable through RELAY_SECRET_KEY_PREVIOUS; `resealDkimKeys` rewrites them under the
// current key (and seals keys stored in clear by earlier versions).
import type { SendingDomain } from '../../domain/management.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import { COLLECTIONS } from './collections.ts';

const PURPOSE = 'dkim-private-key';

export const sealDkimKey = (secrets: SecretBox, pem: string): string => secrets.seal(pem, PURPOSE);

export function dkimPrivateKeyOf(domain: SendingDomain, secrets: SecretBox): string {
  if (domain.dkimPrivateKeySealed) return secrets.open(domain.dkimPrivateKeySealed, PURPOSE);
  if (domain.dkimPrivateKeyPem) return domain.dkimPrivateKeyPem;
  throw new Error(`domain ${domain._id} has no DKIM private key`);
}

/** Seals keys kept in clear by earlier versions and re-seals those of a previous secret. Returns how many changed. */
export async function resealDkimKeys(documents: DocumentStore, secrets: SecretBox): Promise<number> {
  const domains = documents.collection<SendingDomain>(COLLECTIONS.domains);
  let changed = 0;
  for (const domain of await domains.find({})) {
    const current = domain.dkimPrivateKeySealed?.split('.')[1] === secrets.keyId;
    if (current && domain.dkimPrivateKeyPem === undefined) continue;
    const { _v, dkimPrivateKeyPem, ...rest } = domain;
    void dkimPrivateKeyPem;
    const resealed = { ...rest, dkimPrivateKeySealed: sealDkimKey(secrets, dkimPrivateKeyOf(domain, secrets)) };
    // A concurrent edit wins; the next start tries again.
    if (await domains.replace(resealed, _v)) changed++;
  }
  return changed;
}
