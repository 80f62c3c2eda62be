// Message bodies and BCC are kept for seven days (spec: body retention). Events are kept
// forever, so bodies travel in them sealed with a per-email AES-256-GCM key that lives in
// the document store with an expiry; deleting the key is deleting the body everywhere,
// event store backups included ("crypto-shredding").
import { createCipheriv, createDecipheriv, createSecretKey } from 'node:crypto';
import type { EmailContent, SealedContent } from '../../domain/email/events.ts';
import { DuplicateKeyError, type DocumentStore } from '../../infra/ports/document-store.ts';
import { COLLECTIONS } from './collections.ts';
import { pooledRandomBytes } from '../../infra/secrets/random-pool.ts';

export const BODY_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** An email's content key, as stored. */
export interface ContentKey {
  _id: string;
  key: string;
  expiresAt: string;
}

/**
 * The email's content key, made and stored when it has none. Key ids are the email ids: an
 * idempotent retry of one admission finds the key its first attempt stored instead of making
 * a second one. The insert comes first and the read only when it finds the key taken: a
 * lookup costs a scan of the collection on some MongoDB-wire engines (infra/engines/README.md),
 * and most admissions are first attempts. Admission asks for it early, so the key's write
 * shares a commit with the request's rate-limit slot.
 */
export async function contentKeyFor(documents: DocumentStore, emailId: string, now: Date): Promise<ContentKey> {
  const keys = documents.collection<ContentKey>(COLLECTIONS.contentKeys);
  const made: ContentKey = { _id: emailId, key: pooledRandomBytes(32).toString('base64'), expiresAt: new Date(now.getTime() + BODY_RETENTION_MS).toISOString() };
  try {
    return await keys.insert(made);
  } catch (error) {
    if (!(error instanceof DuplicateKeyError)) throw error;
    const stored = await keys.get(emailId);
    if (!stored) throw error;
    return stored;
  }
}

/** Seals the content with the email's key (its id is the email id). */
export function sealWith(key: ContentKey, content: EmailContent): SealedContent {
  const iv = pooledRandomBytes(12);
  // A KeyObject, not a Buffer: with a Buffer key Node imports it on every call, throwing and
  // catching inside (about 37 µs per seal instead of 15).
  const cipher = createCipheriv('aes-256-gcm', createSecretKey(Buffer.from(key.key, 'base64')), iv);
  cipher.setAAD(Buffer.from(key._id));
  const data = Buffer.concat([cipher.update(JSON.stringify(content), 'utf8'), cipher.final()]);
  return { keyId: key._id, alg: 'A256GCM', iv: iv.toString('base64'), data: data.toString('base64'), tag: cipher.getAuthTag().toString('base64') };
}

export async function sealContent(documents: DocumentStore, emailId: string, content: EmailContent, now: Date): Promise<SealedContent> {
  return sealWith(await contentKeyFor(documents, emailId, now), content);
}

/** The content, or null once its key has expired (the body is gone for good). */
export async function openContent(documents: DocumentStore, sealed: SealedContent, now: Date): Promise<EmailContent | null> {
  return (await openRetainedContent(documents, sealed, now))?.content ?? null;
}

/** The content and when its key expires, or null once it has. */
export async function openRetainedContent(documents: DocumentStore, sealed: SealedContent, now: Date): Promise<{ content: EmailContent; expiresAt: string } | null> {
  const key = await documents.collection<ContentKey>(COLLECTIONS.contentKeys).get(sealed.keyId);
  if (!key || key.expiresAt <= now.toISOString()) return null;
  const decipher = createDecipheriv('aes-256-gcm', createSecretKey(Buffer.from(key.key, 'base64')), Buffer.from(sealed.iv, 'base64'));
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
  const key = await documents.collection<ContentKey>(COLLECTIONS.contentKeys).get(emailId);
  if (!key) return 'gone';
  return key.expiresAt <= now.toISOString() ? 'expired' : 'live';
}

/** Which of these emails' content can no longer be read (key gone or expired). */
export async function unreadableContent(documents: DocumentStore, emailIds: string[], now: Date): Promise<string[]> {
  if (emailIds.length === 0) return [];
  const live = await documents.collection<ContentKey>(COLLECTIONS.contentKeys).find({
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
 */
export async function shredExpiredContent(documents: DocumentStore, now: Date, batch = 500): Promise<number> {
  const keys = documents.collection<ContentKey>(COLLECTIONS.contentKeys);
  let removed = 0;
  for (;;) {
    const expired = await keys.find({ where: { expiresAt: { lte: now.toISOString() } }, limit: batch });
    for (const key of expired) if (await keys.delete(key._id)) removed++;
    if (expired.length < batch) break;
  }
  if ((removed > 0 || purgePending.has(documents)) && documents.purgeDeleted) {
    if (await documents.purgeDeleted()) purgePending.delete(documents);
    else purgePending.add(documents);
  }
  return removed;
}

export async function ensureContentKeyIndexes(documents: DocumentStore): Promise<void> {
  await documents.collection<ContentKey>(COLLECTIONS.contentKeys).ensureIndexes([{ name: 'expiresAt', fields: [['expiresAt', 'asc']] }]);
}
