// DKIM private keys at rest: sealed with Relay's secret (infra/secrets/secret-box.ts), so a
// copy of the document store alone signs nothing. Rotation of RELAY_SECRET_KEY keeps old keys
// readable through RELAY_SECRET_KEY_PREVIOUS; `resealDkimKeys` rewrites them under the
// current key (and seals keys stored in clear by earlier versions).
import type { SendingDomain } from '../../domain/management.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { SecretBoxError, sealedKeyIdOf, type SecretBox } from '../../infra/secrets/secret-box.ts';
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
  /**
   * Domains with a key still not sealed under the current secret key after the pass (no key
   * opens it, or a concurrent edit won): while above 0, a previous key may still be needed.
   */
  remaining: number;
}

/**
 * Seals keys kept in clear by earlier versions and re-seals those of a previous secret: the
 * active key and a pending rotation's (domain/dkim-rotation.ts), each on its own, so that one
 * that no key opens keeps the other from neither.
 */
export async function resealDkimKeys(documents: DocumentStore, secrets: SecretBox): Promise<ResealOutcome> {
  const domains = documents.collection<SendingDomain>(COLLECTIONS.domains);
  const outcome: ResealOutcome = { changed: 0, unopenable: [], remaining: 0 };
  for (const domain of await domains.find({})) {
    const pending = domain.dkimRotation ?? null;
    const activeCurrent = sealedKeyIdOf(domain.dkimPrivateKeySealed) === secrets.keyId && domain.dkimPrivateKeyPem === undefined;
    const pendingCurrent = pending === null || sealedKeyIdOf(pending.privateKeySealed) === secrets.keyId;
    if (activeCurrent && pendingCurrent) continue;
    const { _v, ...body } = domain;
    let resealed: SendingDomain = body;
    let changed = false;
    let left = false;
    // Sealed under a key Relay no longer has (say, a domain created by a process not yet
    // restarted onto the new key): only that domain's mail fails (message_unbuildable,
    // delivery/attempt.ts), never every workspace's by keeping the sender from starting.
    const unopenable = (sealed: string | undefined, error: SecretBoxError) => {
      outcome.unopenable.push({ domainId: domain._id, sealedWithKeyId: sealedKeyIdOf(sealed), reason: error.message });
      left = true;
    };
    if (!activeCurrent) {
      try {
        const { dkimPrivateKeyPem, ...rest } = resealed;
        void dkimPrivateKeyPem;
        resealed = { ...rest, dkimPrivateKeySealed: sealDkimKey(secrets, dkimPrivateKeyOf(domain, secrets)) };
        changed = true;
      } catch (error) {
        if (!(error instanceof SecretBoxError)) throw error;
        unopenable(domain.dkimPrivateKeySealed, error);
      }
    }
    if (!pendingCurrent && pending) {
      try {
        resealed = { ...resealed, dkimRotation: { ...pending, privateKeySealed: sealDkimKey(secrets, secrets.open(pending.privateKeySealed, PURPOSE)) } };
        changed = true;
      } catch (error) {
        if (!(error instanceof SecretBoxError)) throw error;
        unopenable(pending.privateKeySealed, error);
      }
    }
    // A concurrent edit wins; the next start tries again.
    if (changed && await domains.replace(resealed, _v)) outcome.changed++;
    else if (changed) left = true;
    if (left) outcome.remaining++;
  }
  return outcome;
}
