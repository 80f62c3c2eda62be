// The outbox transport's messages as the dashboard and `relay outbox` read them: the .eml
// files of a project's emails, newest first.
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import { listOutbox, readOutbox } from '../../infra/mail/outbox-transport.ts';
import type { EmailView } from '../../projections/email-view.ts';
import { COLLECTIONS } from './collections.ts';

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

/** The exact bytes written for an email (of the project, when given), or null. */
export async function outboxMessage(documents: DocumentStore, dir: string, emailId: string, projectId?: string): Promise<Buffer | null> {
  if (projectId !== undefined) {
    const view = await documents.collection<EmailView>(COLLECTIONS.emails).get(emailId);
    if (view?.projectId !== projectId) return null;
  }
  return (await readOutbox(dir, emailId))?.raw ?? null;
}
