// DKIM key rotation of a sending domain, the way large senders do it: a new key is made under a
// new selector and its record shown while mail goes on being signed with the current key; only
// once DNS shows the new record does signing switch to it, so no message is ever signed by a key
// receivers cannot find. The replaced key is retired: its record may stay published for a few
// days, so that messages signed before the switch (queued, retried, or re-verified by a
// receiver later) still verify. Pure rules: the services (apps/services/management/domains.ts)
// make the key, ask DNS and store.
import { conflict, notFound, validationError } from './errors.ts';
import type { PendingDkimKey, RetiredDkimKey, SendingDomain, StoredRecordCheck } from './management.ts';

/** Retired keys remembered per domain, newest first; older ones' records are long unpublished. */
export const MAX_RETIRED_DKIM_KEYS = 5;

export type DkimKeys = Pick<SendingDomain, 'name' | 'dkimSelector' | 'dkimPublicKeyBase64' | 'dkimPrivateKeySealed' | 'dkimPrivateKeyPem' | 'dkimRotation' | 'dkimRetiredKeys'>;

export type DkimRotationState = 'none' | 'pending';

export const rotationState = (domain: Pick<SendingDomain, 'dkimRotation'>): DkimRotationState => (domain.dkimRotation ? 'pending' : 'none');

/** Selectors the domain has signed with or is about to: a new key never reuses one, or two keys would share a record name. */
export function selectorsInUse(domain: Pick<SendingDomain, 'dkimSelector' | 'dkimRotation' | 'dkimRetiredKeys'>): string[] {
  return [domain.dkimSelector, ...(domain.dkimRotation ? [domain.dkimRotation.selector] : []), ...(domain.dkimRetiredKeys ?? []).map((k) => k.selector)];
}

export interface NewDkimKey {
  /** Already normalized (domain/sending-domain.ts normalizeDkimSelector). */
  selector: string;
  publicKeyBase64: string;
  privateKeySealed: string;
}

/** Throws unless a rotation to a key under `selector` may start: none pending (conflict), the selector never used by the domain (validation_error). */
export function checkRotationMayStart(domain: Pick<SendingDomain, 'name' | 'dkimSelector' | 'dkimRotation' | 'dkimRetiredKeys'>, selector: string): void {
  if (domain.dkimRotation) {
    throw conflict(`a DKIM key rotation of ${domain.name} is already pending (selector ${domain.dkimRotation.selector}); complete or cancel it first`);
  }
  if (selectorsInUse(domain).includes(selector)) {
    throw validationError(`the selector ${selector} is one ${domain.name} has used already; a new key needs a new selector`);
  }
}

/** The domain with a rotation to `key` pending; signing stays with the active key. */
export function startDkimRotation<D extends DkimKeys>(domain: D, key: NewDkimKey, now: Date): D {
  checkRotationMayStart(domain, key.selector);
  const pending: PendingDkimKey = { ...key, startedAt: now.toISOString(), check: null, checkedAt: null };
  return { ...domain, dkimRotation: pending };
}

/**
 * How long a pending rotation's last check of its record stands: the re-check pass (every 10
 * minutes at most: apps/services/domain-recheck.ts) checks the record again once it is older, so
 * a rotation completes by itself within minutes of the record appearing, with no verify asked.
 */
export const ROTATION_CHECK_EVERY_MS = 5 * 60_000;

/** Whether a pending rotation's record is due for a check by the re-check pass at `now`. */
export function rotationCheckDue(domain: Pick<SendingDomain, 'dkimRotation'>, now: Date): boolean {
  const pending = domain.dkimRotation;
  if (!pending) return false;
  // Either way: a check stamped ahead of `now` (the clock stepped back) does not hold it off.
  return pending.checkedAt === null || Math.abs(now.getTime() - Date.parse(pending.checkedAt)) >= ROTATION_CHECK_EVERY_MS;
}

/** What a DNS check of the pending key's record means for the rotation: only a record checked ok completes it. */
export const rotationAfterCheck = (check: Pick<StoredRecordCheck, 'status'>): 'complete' | 'wait' => (check.status === 'ok' ? 'complete' : 'wait');

/** The domain after a check of the pending key's record found it `check` at `now`: completed, or still pending with the check kept. */
export function afterRotationCheck<D extends DkimKeys>(domain: D, check: StoredRecordCheck, now: Date): D {
  const pending = domain.dkimRotation;
  if (!pending) throw new Error(`${domain.name} has no DKIM key rotation pending`);
  if (rotationAfterCheck(check) === 'wait') return { ...domain, dkimRotation: { ...pending, check, checkedAt: now.toISOString() } };
  const retired: RetiredDkimKey = { selector: domain.dkimSelector, publicKeyBase64: domain.dkimPublicKeyBase64, retiredAt: now.toISOString() };
  const { dkimPrivateKeyPem, ...rest } = domain;
  void dkimPrivateKeyPem; // the retired key's, kept in clear by an old version: it goes with it
  return {
    ...rest,
    dkimSelector: pending.selector,
    dkimPublicKeyBase64: pending.publicKeyBase64,
    dkimPrivateKeySealed: pending.privateKeySealed,
    dkimRotation: null,
    dkimRetiredKeys: [retired, ...(domain.dkimRetiredKeys ?? [])].slice(0, MAX_RETIRED_DKIM_KEYS),
  } as D;
}

/** The domain without its pending rotation: the new key is dropped, the active one signs on. */
export function cancelDkimRotation<D extends DkimKeys>(domain: D): D {
  if (!domain.dkimRotation) throw notFound(`${domain.name} has no DKIM key rotation pending`);
  return { ...domain, dkimRotation: null };
}
