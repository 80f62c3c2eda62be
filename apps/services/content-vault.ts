// Message bodies and BCC are kept for seven days (spec: body retention). Events are kept
// forever, so bodies travel in them sealed with a per-email AES-256-GCM key that lives in
// the document store with an expiry; deleting the key is deleting the body everywhere,
// event store backups included ("crypto-shredding").
//
// The key is stored sealed under Relay's secret key (envelope encryption: SecretBox, purpose
// "content-key", bound to the email id, so a key row moved onto another email opens nothing): the
// store alone (relay.db, a backup made without the key, a copy of MongoDB) opens no body. Rows
// stored before keys were sealed hold the key in clear and still open: they expire within the
// retention like any other, so nothing converts them beyond what the sender's re-seal pass does.
import { createCipheriv, createDecipheriv, createSecretKey } from 'node:crypto';
import type { EmailContent, SealedContent } from '../../domain/email/events.ts';
import { DuplicateKeyError, type DocumentStore, type Stored } from '../../infra/ports/document-store.ts';
import { deferDurability } from '../../infra/ports/durability.ts';
import { SecretBoxError, sealedKeyIdOf, type SecretBox } from '../../infra/secrets/secret-box.ts';
import { COLLECTIONS } from './collections.ts';
import { pooledRandomBytes } from '../../infra/secrets/random-pool.ts';

export const BODY_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/**
 * An email's content key. As stored (the content_keys collection), `key` is the AES-256 key
 * sealed under the secret key (sealContentKey), or in clear (base64) in rows stored before keys
 * were sealed; opened (HeldContentKey, sealWith), it is the key as base64.
 */
export interface ContentKey {
  _id: string;
  key: string;
  expiresAt: string;
}

/** What of Relay's secret (services.secrets) seals and opens content keys. */
export type ContentKeySecrets = Pick<SecretBox, 'seal' | 'open' | 'isSealed' | 'keyId'>;

const KEY_PURPOSE = 'content-key';

/** The key as stored: sealed under the current secret key, for this email only. */
const sealContentKey = (secrets: ContentKeySecrets, emailId: string, key: string): string => secrets.seal(key, KEY_PURPOSE, emailId);


/** The key of a stored row as base64; throws SecretBoxError when no configured secret key opens it (or it belongs to another email). */
function openedKey(secrets: ContentKeySecrets, stored: Pick<ContentKey, '_id' | 'key'>): string {
  if (!secrets.isSealed(stored.key)) return stored.key;
  try {
    return secrets.open(stored.key, KEY_PURPOSE, stored._id);
  } catch (error) {
    if (!(error instanceof SecretBoxError)) throw error;
    throw new SecretBoxError(`the content key of email ${stored._id} does not open: ${error.message}`);
  }
}

const newKey = (): string => pooledRandomBytes(32).toString('base64');

/** An email's content key as one admission holds it. */
export interface HeldContentKey {
  /** Opened, at the version of its stored row. */
  key: Stored<ContentKey>;
  /**
   * This admission stored the key (rather than taking over one stored before): only then may
   * it take the key back when it is refused (giveBackContentKey).
   */
  made: boolean;
}

/** Rounds lost to concurrent writers of one key (other attempts, the sweep) before giving up. */
const TAKE_ATTEMPTS = 20;

/**
 * How much earlier than this admission's own a key's expiry may be and still be used as it is,
 * once another attempt took the key over: concurrent attempts of one request (a burst of
 * retries) then write it once between them, not once each.
 */
const RENEWAL_SLACK_MS = 1_000;

const contentKeysOf = (documents: DocumentStore) => documents.collection<ContentKey>(COLLECTIONS.contentKeys);

/**
 * The email's content key, stored for an email about to be admitted at `now`: it expires
 * BODY_RETENTION_MS after `now`, the admission's time. Key ids are the email ids, so every
 * attempt of one request (same Idempotency-Key) finds the same key.
 *
 * Admission asks for it only once the request passed its rate limit and the rules, right
 * before its email is appended, so a refused request writes none. A key found stored belongs
 * to no admitted email yet (admission asks only while the email's stream has none): a
 * concurrent attempt of the same request, or an attempt that stopped between the key and the
 * email (a crash, a store error). It is taken over by compare-and-set: its expiry moves to
 * `now` + retention (never earlier), keeping its key material, which a concurrent attempt may
 * have sealed with already; an expired one gets new material, since no attempt in flight holds
 * it (taking it over would have renewed it). The write also moves the key's version past the
 * one it was made at, so neither its maker's give-back nor a sweep that listed it expired
 * removes it from under the new holder (both delete at the version they saw). A key already
 * taken over and expiring when this admission's would (within RENEWAL_SLACK_MS) is used as it is.
 * The key is returned opened, and written sealed under the current secret key: a new one costs
 * one seal of its 32 bytes, and no read.
 *
 * The insert comes first and the read only when it finds the key taken: a lookup costs a scan
 * of the collection on some MongoDB-wire engines (infra/engines/README.md), and most
 * admissions are first attempts.
 */
export async function takeContentKey(documents: DocumentStore, secrets: ContentKeySecrets, emailId: string, now: Date): Promise<HeldContentKey> {
  const keys = contentKeysOf(documents);
  const expiresAt = new Date(now.getTime() + BODY_RETENTION_MS).toISOString();
  const usableFrom = new Date(now.getTime() + BODY_RETENTION_MS - RENEWAL_SLACK_MS).toISOString();
  let insert = true;
  for (let attempt = 1; attempt <= TAKE_ATTEMPTS; attempt++) {
    if (insert) {
      const key = newKey();
      try {
        const stored = await keys.insert({ _id: emailId, key: sealContentKey(secrets, emailId, key), expiresAt });
        return { key: { ...stored, key }, made: true };
      } catch (error) {
        if (!(error instanceof DuplicateKeyError)) throw error;
      }
    }
    const stored = await keys.get(emailId);
    insert = stored === null; // given back or swept meanwhile: store a new one
    if (!stored) continue;
    if (stored._v > 1 && stored.expiresAt >= usableFrom) return { key: { ...stored, key: openedKey(secrets, stored) }, made: false };
    const live = stored.expiresAt > now.toISOString();
    const key = live ? openedKey(secrets, stored) : newKey();
    // Written sealed under the current secret key, whatever sealed the row taken over.
    const sealed = live && sealedKeyIdOf(stored.key) === secrets.keyId ? stored.key : sealContentKey(secrets, emailId, key);
    const renewed: ContentKey = { _id: emailId, key: sealed, expiresAt: live && stored.expiresAt > expiresAt ? stored.expiresAt : expiresAt };
    const taken = await keys.replace(renewed, stored._v);
    if (taken) return { key: { ...taken, key }, made: false };
  }
  throw new Error(`content key ${emailId}: still changing after ${TAKE_ATTEMPTS} attempts`);
}

/**
 * Removes the key an admission stored when that admission is refused after all (its quota
 * charge refused), so a refused request leaves no key behind. Only a key it made, and only at
 * the version it made it: any other attempt that took the key over since (and may seal its
 * email with it) moved the version, and the key stays (as after a re-seal by resealContentKeys
 * meanwhile: the key then stays until it expires).
 */
export async function giveBackContentKey(documents: DocumentStore, held: HeldContentKey): Promise<boolean> {
  if (!held.made) return false;
  return contentKeysOf(documents).delete(held.key._id, held.key._v);
}

/** What sealing encrypts: the content as JSON, in UTF-8. */
export const contentPlaintext = (content: EmailContent): Buffer => Buffer.from(JSON.stringify(content), 'utf8');

/**
 * How many characters sealed content adds to its event over the unsealed placeholder (empty
 * iv, data and tag), for a plaintext of this many bytes: GCM's ciphertext is as long as the
 * plaintext, and iv (12 bytes), ciphertext and tag (16 bytes) travel as base64, which needs no
 * JSON escaping.
 */
export const sealedContentChars = (plaintextBytes: number): number => base64Chars(12) + base64Chars(plaintextBytes) + base64Chars(16);

const base64Chars = (bytes: number): number => 4 * Math.ceil(bytes / 3);

/** Seals the content with the email's key, opened (its id is the email id). */
export function sealWith(key: ContentKey, content: EmailContent): SealedContent {
  return sealPlaintext(key, contentPlaintext(content));
}

/** sealWith, for content already made plaintext (contentPlaintext): a caller that measured it serializes it once. */
export function sealPlaintext(key: ContentKey, plaintext: Buffer): SealedContent {
  const iv = pooledRandomBytes(12);
  // A KeyObject, not a Buffer: with a Buffer key Node imports it on every call, throwing and
  // catching inside (about 37 µs per seal instead of 15).
  const cipher = createCipheriv('aes-256-gcm', createSecretKey(Buffer.from(key.key, 'base64')), iv);
  cipher.setAAD(Buffer.from(key._id));
  const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return { keyId: key._id, alg: 'A256GCM', iv: iv.toString('base64'), data: data.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

export async function sealContent(documents: DocumentStore, secrets: ContentKeySecrets, emailId: string, content: EmailContent, now: Date): Promise<SealedContent> {
  return sealWith((await takeContentKey(documents, secrets, emailId, now)).key, content);
}

/**
 * The content, or null once its key has expired (the body is gone for good). Throws
 * SecretBoxError when its key is sealed under a secret key Relay is not given (the body opens
 * again once that key is back in RELAY_SECRET_KEY_PREVIOUS).
 */
export async function openContent(documents: DocumentStore, secrets: ContentKeySecrets, sealed: SealedContent, now: Date): Promise<EmailContent | null> {
  return (await openRetainedContent(documents, secrets, sealed, now))?.content ?? null;
}

/** The content and when its key expires, or null once it has; throws as openContent. */
export async function openRetainedContent(documents: DocumentStore, secrets: ContentKeySecrets, sealed: SealedContent, now: Date): Promise<{ content: EmailContent; expiresAt: string } | null> {
  const key = await contentKeysOf(documents).get(sealed.keyId);
  if (!key || key.expiresAt <= now.toISOString()) return null;
  const decipher = createDecipheriv('aes-256-gcm', createSecretKey(Buffer.from(openedKey(secrets, key), 'base64')), Buffer.from(sealed.iv, 'base64'));
  decipher.setAAD(Buffer.from(sealed.keyId));
  decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
  const plain = Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()]);
  return { content: JSON.parse(plain.toString('utf8')) as EmailContent, expiresAt: key.expiresAt };
}

/**
 * Whether an email's content can still be read: 'live', 'expired' (its key is past its expiry,
 * not swept yet) or 'gone' (no key: destroyed by the sweep, or the email never had content).
 */
export async function contentKeyState(documents: DocumentStore, emailId: string, now: Date): Promise<'live' | 'expired' | 'gone'> {
  const key = await contentKeysOf(documents).get(emailId);
  if (!key) return 'gone';
  return key.expiresAt <= now.toISOString() ? 'expired' : 'live';
}

/** Which of these emails' content can no longer be read (key gone or expired). */
export async function unreadableContent(documents: DocumentStore, emailIds: string[], now: Date): Promise<string[]> {
  if (emailIds.length === 0) return [];
  const live = await contentKeysOf(documents).find({
    where: { _id: { in: emailIds }, expiresAt: { gt: now.toISOString() } },
    fields: ['expiresAt'],
    limit: emailIds.length,
  });
  const readable = new Set(live.map((key) => key._id));
  return emailIds.filter((id) => !readable.has(id));
}

/** Stores whose last purge could not finish (a reader held the WAL): the next sweep purges again. */
const purgePending = new WeakSet<DocumentStore>();

/**
 * Destroys keys past their expiry; returns how many. A deleted key must not survive in the
 * store's files either, so after deleting, the store purges what it deleted where it can.
 *
 * A batch's deletes go together, in one deferred-durability scope: the embedded store commits
 * and syncs them as one, where one at a time each waited for a sync of its own (about 600 keys
 * a second, below what admission stores under load: bodies would outlive their retention). A
 * store that acknowledges a delete once durable (MongoDB) just runs them side by side. The
 * scope has settled before the next batch is listed, so the listing never finds them again.
 */
export async function shredExpiredContent(documents: DocumentStore, now: Date, batch = 500): Promise<number> {
  const keys = contentKeysOf(documents);
  let removed = 0;
  for (;;) {
    const expired = await keys.find({ where: { expiresAt: { lte: now.toISOString() } }, limit: batch });
    // At the version listed: a key an admission took over (renewed) meanwhile is no longer expired.
    const deleted = await deferDurability(() => Promise.all(expired.map((key) => keys.delete(key._id, key._v))));
    removed += deleted.filter(Boolean).length;
    if (expired.length < batch) break;
  }
  if ((removed > 0 || purgePending.has(documents)) && documents.purgeDeleted) {
    if (await documents.purgeDeleted()) purgePending.delete(documents);
    else purgePending.add(documents);
  }
  return removed;
}

export async function ensureContentKeyIndexes(documents: DocumentStore): Promise<void> {
  await contentKeysOf(documents).ensureIndexes([{ name: 'expiresAt', fields: [['expiresAt', 'asc']] }]);
}

/** A content key that no configured secret key opens: whose and which key sealed it, never the key. */
export interface UnopenableContentKey {
  emailId: string;
  /** The id of the secret key in the sealed value (secret-box.ts). */
  sealedWithKeyId: string | null;
}

export interface ContentKeyReseal {
  changed: number;
  /** How many keys no configured secret key opens; `unopenable` names the first UNOPENABLE_LISTED. */
  unopenableCount: number;
  unopenable: UnopenableContentKey[];
  /**
   * Live keys still not sealed under the current secret key after the pass (no key opens them, or
   * an admission renewed one meanwhile): while above 0, a previous key may still be needed.
   */
  remaining: number;
}

const RESEAL_PAGE = 1_000;
const UNOPENABLE_LISTED = 100;

/**
 * Seals under the current secret key every live content key sealed under a previous one (or
 * stored in clear), so that bodies still open once the previous key is dropped from
 * RELAY_SECRET_KEY_PREVIOUS, as resealDkimKeys does for DKIM keys. Expired keys are left to the
 * sweep. Reads the collection in pages of its _id order, each a bounded read, so a large one
 * never holds the event loop; null when `signal` aborted it before the end.
 */
export async function resealContentKeys(documents: DocumentStore, secrets: ContentKeySecrets, now: () => Date, signal?: AbortSignal): Promise<ContentKeyReseal | null> {
  const keys = contentKeysOf(documents);
  const outcome: ContentKeyReseal = { changed: 0, unopenableCount: 0, unopenable: [], remaining: 0 };
  let after: string | undefined;
  for (;;) {
    if (signal?.aborted) return null;
    const page = await keys.find({ orderBy: [['_id', 'asc']], limit: RESEAL_PAGE, fields: ['key', 'expiresAt'], ...(after === undefined ? {} : { after: { _id: after } }) });
    const at = now().toISOString();
    const stale = page.filter((stored) => stored.expiresAt > at && sealedKeyIdOf(stored.key) !== secrets.keyId);
    // A page's writes go together, as the sweep's deletes do (shredExpiredContent).
    const results = await deferDurability(() => Promise.all(stale.map(async (stored): Promise<'resealed' | 'unopenable' | 'left' | 'done'> => {
      let key: string;
      try {
        key = openedKey(secrets, stored);
      } catch (error) {
        if (!(error instanceof SecretBoxError)) throw error;
        if (outcome.unopenable.length < UNOPENABLE_LISTED) outcome.unopenable.push({ emailId: stored._id, sealedWithKeyId: sealedKeyIdOf(stored.key) });
        return 'unopenable';
      }
      // At the version read: an admission that took the key over meanwhile wrote it under its own
      // secret key (the current one, unless it runs on an older configuration); a sweep or a
      // give-back that deleted it leaves nothing to keep.
      if (await keys.replace({ _id: stored._id, key: sealContentKey(secrets, stored._id, key), expiresAt: stored.expiresAt }, stored._v)) return 'resealed';
      const current = await keys.get(stored._id);
      return current === null || current.expiresAt <= at || sealedKeyIdOf(current.key) === secrets.keyId ? 'done' : 'left';
    })));
    for (const result of results) {
      if (result === 'resealed') outcome.changed++;
      if (result === 'unopenable') outcome.unopenableCount++;
      if (result === 'unopenable' || result === 'left') outcome.remaining++;
    }
    if (page.length < RESEAL_PAGE) return outcome;
    after = page[page.length - 1]._id;
  }
}
