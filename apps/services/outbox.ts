// The outbox transport's messages as the dashboard and `relay outbox` read them: the .eml
// files of a project's emails, newest first. A message's files hold its body and BCC, so they
// live no longer than its content key (seven days): past it they are not served, and the
// retention sweep deletes them (deleteUnreadableOutboxCopies).
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { isMissing } from '../../infra/mail/outbox-files.ts';
import { listOutbox, outboxEmailIds, readOutbox, removeFromOutbox, removeLeftTemps } from '../../infra/mail/outbox-transport.ts';
import type { EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';
import { BODY_RETENTION_MS, contentKeyState, unreadableContent } from './content-vault.ts';

export interface OutboxMessage {
  emailId: string;
  subject: string | null;
  toAddresses: string[];
  createdAt: string | null;
  size: number;
  writtenAt: string;
}

/** The file system calls a project's listing makes (tests count them). */
export interface OutboxFiles {
  stat(path: string): Promise<{ isFile(): boolean; size: number; mtime: Date }>;
}

const NODE_FILES: OutboxFiles = { stat };

/** The whole outbox's messages, newest written first (`relay outbox list`: every project's, so every file). */
export async function outboxMessages(documents: DocumentStore, dir: string, options: { limit: number }): Promise<OutboxMessage[]> {
  const views = documents.collection<EmailView>(COLLECTIONS.emails);
  const out: OutboxMessage[] = [];
  for (const entry of (await listOutbox(dir)).slice(0, options.limit)) {
    const view = await views.get(entry.emailId);
    out.push({
      emailId: entry.emailId,
      subject: view?.subject ?? null,
      toAddresses: view?.toAddresses ?? [],
      createdAt: view?.createdAt ?? null,
      size: entry.size,
      writtenAt: entry.modifiedAt.toISOString(),
    });
  }
  return out;
}

const LISTED_FIELDS = ['subject', 'toAddresses', 'createdAt'] as const satisfies ReadonlyArray<keyof EmailView>;
const MAX_BATCH = 1_000;
/**
 * Emails one listing looks at, at most. With another transport (smtp, mx) almost no email has
 * a copy, and a busy project's seven days are millions of emails: past this the page ends short
 * rather than the request stat-ing them all.
 */
export const MAX_EXAMINED = 5_000;

/**
 * A project's outbox messages, newest email first (createdAt, then id, as the email list), from
 * the project's own emails in the read model: each has its copy at `<dir>/<emailId>.eml` (the
 * documented layout) or none (not written yet, suppressed, sent by another transport, deleted by
 * retention), so the cost is the project's emails down to the `limit`-th copy, whatever other
 * projects wrote. Only emails within body retention are looked at: an older one's copy is not
 * served, and the sweep deletes it. An email not yet projected is not listed. At most
 * `maxExamined` emails (MAX_EXAMINED) are looked at: the page may then hold fewer than `limit`.
 */
export async function projectOutboxMessages(
  documents: DocumentStore, dir: string, projectId: string, options: { limit: number; now: Date; maxExamined?: number }, files: OutboxFiles = NODE_FILES,
): Promise<OutboxMessage[]> {
  const views = documents.collection<EmailView>(COLLECTIONS.emails);
  const retained = new Date(options.now.getTime() - BODY_RETENTION_MS).toISOString();
  const out: OutboxMessage[] = [];
  let after: { createdAt: string; _id: string } | undefined;
  let examined = 0;
  const maxExamined = options.maxExamined ?? MAX_EXAMINED;
  // The first batch is the page itself (in the outbox's own mode nearly every email has a copy);
  // emails without one make the later batches grow, to keep the round trips few.
  for (let batch = Math.min(options.limit, maxExamined); out.length < options.limit && examined < maxExamined; batch = Math.min(batch * 2, MAX_BATCH, maxExamined - examined)) {
    const emails = await views.find({
      where: { projectId, createdAt: { gt: retained } },
      orderBy: [['createdAt', 'desc'], ['_id', 'desc']],
      limit: batch,
      after,
      fields: LISTED_FIELDS,
    });
    // Files looked at a page's worth at a time, never more than the page still needs.
    for (let i = 0; i < emails.length && out.length < options.limit; ) {
      const chunk = emails.slice(i, i + options.limit - out.length);
      i += chunk.length;
      const copies = await Promise.all(chunk.map((view) => copyOf(files, dir, view._id)));
      chunk.forEach((view, n) => {
        const copy = copies[n];
        if (copy) out.push({ emailId: view._id, subject: view.subject, toAddresses: view.toAddresses, createdAt: view.createdAt, ...copy });
      });
    }
    examined += emails.length;
    if (emails.length < batch) break;
    const last = emails[emails.length - 1];
    after = { createdAt: last.createdAt, _id: last._id };
  }
  return out;
}

/** The size and write time of an email's .eml; null when it has none (never written, or deleted meanwhile). */
async function copyOf(files: OutboxFiles, dir: string, emailId: string): Promise<{ size: number; writtenAt: string } | null> {
  try {
    const info = await files.stat(join(dir, `${emailId}.eml`));
    return info.isFile() ? { size: info.size, writtenAt: info.mtime.toISOString() } : null;
  } catch (error) {
    if (isMissing(error)) return null;
    throw error;
  }
}

/**
 * One email's outbox copy: its bytes exactly as written; 'expired' once its content is past
 * retention (whether or not the sweep has deleted the files yet); 'missing' when there is no
 * such email (of the project, when given) or it has no outbox copy.
 */
export type OutboxLookup = { found: Buffer } | 'expired' | 'missing';

export async function outboxMessage(documents: DocumentStore, dir: string, emailId: string, now: Date, projectId?: string): Promise<OutboxLookup> {
  const view = await documents.collection<EmailView>(COLLECTIONS.emails).get(emailId);
  if (projectId !== undefined && view?.projectId !== projectId) return 'missing';
  const key = await contentKeyState(documents, emailId, now);
  if (key === 'expired') return 'expired';
  const copy = await readOutbox(dir, emailId);
  // Every accepted email gets its key before its first event: an email (or a copy) that is
  // known while its key is not had it destroyed by retention.
  if (key === 'gone') return copy || view ? 'expired' : 'missing';
  return copy ? { found: copy.raw } : 'missing';
}

/**
 * Retention's outbox step: deletes the files of every email in the outbox whose content can no
 * longer be read (key destroyed or expired); returns how many emails' files went. It looks at
 * the files, not at the keys destroyed in this sweep, so a copy the sweep missed (written
 * while its key was being destroyed, or left by a sweep that stopped halfway) goes next time.
 * The temporary copies a write that died left go too: those of such emails, and any older
 * than a write lasts (not counted: they were never a message in the outbox).
 */
export async function deleteUnreadableOutboxCopies(documents: DocumentStore, dir: string, now: Date, batch = 500): Promise<number> {
  const ids = await outboxEmailIds(dir);
  let deleted = 0;
  for (let i = 0; i < ids.length; i += batch) {
    for (const emailId of await unreadableContent(documents, ids.slice(i, i + batch), now)) {
      if (await removeFromOutbox(dir, emailId)) deleted++;
    }
  }
  await removeLeftTemps(dir, now, (emailIds) => unreadableContent(documents, emailIds, now), batch);
  return deleted;
}
