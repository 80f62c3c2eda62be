// The outbox transport's messages as the dashboard and `relay outbox` read them: the .eml
// files of a project's emails, newest first. A message's files hold its body and BCC, so they
// live no longer than its content key (seven days): past it they are not served, and the
// retention sweep deletes them (deleteUnreadableOutboxCopies).
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { listOutbox, outboxEmailIds, readOutbox, removeFromOutbox } from '../../infra/mail/outbox-transport.ts';
import type { EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';
import { contentKeyState, unreadableContent } from './content-vault.ts';

export interface OutboxMessage {
  emailId: string;
  subject: string | null;
  toAddresses: string[];
  createdAt: string | null;
  size: number;
  writtenAt: string;
}

/** The outbox's messages, newest first; with a project, only that project's. */
export async function outboxMessages(documents: DocumentStore, dir: string, options: { projectId?: string; limit: number }): Promise<OutboxMessage[]> {
  const entries = await listOutbox(dir);
  const views = documents.collection<EmailView>(COLLECTIONS.emails);
  const out: OutboxMessage[] = [];
  for (const entry of entries) {
    if (out.length >= options.limit) break;
    const view = await views.get(entry.emailId);
    if (options.projectId !== undefined && view?.projectId !== options.projectId) continue;
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
 */
export async function deleteUnreadableOutboxCopies(documents: DocumentStore, dir: string, now: Date, batch = 500): Promise<number> {
  const ids = await outboxEmailIds(dir);
  let deleted = 0;
  for (let i = 0; i < ids.length; i += batch) {
    for (const emailId of await unreadableContent(documents, ids.slice(i, i + batch), now)) {
      if (await removeFromOutbox(dir, emailId)) deleted++;
    }
  }
  return deleted;
}
