// DKIM private keys at rest: sealed with Relay's secret (infra/secrets/secret-box.ts), so a
// copy of the document store alone signs nothing. Rotation of RELAY_SECRET_KEY keeps old keys
// readable through RELAY_SECRET_KEY_PREVIOUS; `resealDkimKeys` rewrites them under the
// current key (and seals keys stored in clear by earlier versions).
import type { SendingDomain } from '../../domain/management.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { SecretBoxError, type SecretBox } from '../../infra/secrets/secret-box.ts';
import { COLLECTIONS } from './collections.ts';

const PURPOSE = 'dkim-private-key';

export const sealDkimKey = (secrets: SecretBox, pem: string): string => secrets.seal(pem, PURPOSE);

export function dkimPrivateKeyOf(domain: SendingDomain, secrets: SecretBox): string {
  if (domain.dkimPrivateKeySealed) return secrets.open(domain.dkimPrivateKeySealed, PURPOSE);
  if (domain.dkimPrivateKeyPem) return domain.dkimPrivateKeyPem;
  throw new Error(`domain ${domain._id} has no DKIM private key`);
}

/** A domain whose key no configured secret opens: which key sealed it, never the key itself. */
export interface UnopenableDkimKey {
  domainId: string;
  /** The key id in the sealed value (secret-box.ts), or null when it is not a sealed value. */
  sealedWithKeyId: string | null;
  reason: string;
}

export interface ResealOutcome {
  changed: number;
  unopenable: UnopenableDkimKey[];
}

/** Seals keys kept in clear by earlier versions and re-seals those of a previous secret. */
export async function resealDkimKeys(documents: DocumentStore, secrets: SecretBox): Promise<ResealOutcome> {
  const domains = documents.collection<SendingDomain>(COLLECTIONS.domains);
  const outcome: ResealOutcome = { changed: 0, unopenable: [] };
  for (const domain of await domains.find({})) {
    const current = domain.dkimPrivateKeySealed?.split('.')[1] === secrets.keyId;
    if (current && domain.dkimPrivateKeyPem === undefined) continue;
    const { _v, dkimPrivateKeyPem, ...rest } = domain;
    void dkimPrivateKeyPem;
    let pem: string;
    try {
      pem = dkimPrivateKeyOf(domain, secrets);
    } catch (error) {
      if (!(error instanceof SecretBoxError)) throw error;
      // Sealed under a key Relay no longer has (say, a domain created by a process not yet
      // restarted onto the new key): only that domain's mail fails (message_unbuildable,
      // delivery/attempt.ts), never every workspace's by keeping the sender from starting.
      outcome.unopenable.push({ domainId: domain._id, sealedWithKeyId: domain.dkimPrivateKeySealed?.split('.')[1] ?? null, reason: error.message });
      continue;
    }
    const resealed = { ...rest, dkimPrivateKeySealed: sealDkimKey(secrets, pem) };
    // A concurrent edit wins; the next start tries again.
    if (await domains.replace(resealed, _v)) outcome.changed++;
  }
  return outcome;
}
