// An email's message as admitted, for people reading it in the dashboard: the addresses and
// headers from its admission event, the bodies opened from the sealed content while it is
// retained (apps/services/content-vault.ts). BCC stays out, as in every read.
import { RelayError } from '../../domain/errors.ts';
import type { DocumentStore } from '../../infra/ports/document-store.ts';
import type { EventStore } from '../../infra/ports/event-store.ts';
import type { SecretBox } from '../../infra/secrets/secret-box.ts';
import { openRetainedContent } from './content-vault.ts';
import { readEmailStream } from './email-stream.ts';

export interface EmailMessage {
  id: string;
  from: string;
  to: string[];
  cc: string[];
  replyTo: string | null;
  subject: string;
  /** The headers the sender gave (Relay adds its own when it composes: Message-ID, DKIM-Signature, …). */
  headers: Record<string, string>;
  html: string | null;
  text: string | null;
  /** When the bodies are destroyed (seven days after admission). */
  retainedUntil: string;
}

/**
 * The message of an email of `projectId`. 404 for an email of another project or none at all;
 * 410 content_expired once its bodies are past retention (the addresses are still in the detail).
 */
export async function emailMessage(documents: DocumentStore, events: EventStore, secrets: SecretBox, projectId: string, emailId: string, now: Date): Promise<EmailMessage> {
  const [first] = await readEmailStream(events, emailId);
  if (!first || (first.type !== 'EmailAccepted' && first.type !== 'EmailSuppressed') || first.data.projectId !== projectId) {
    throw new RelayError('not_found', `email ${emailId} was not found`);
  }
  const admitted = first.data;
  const opened = await openRetainedContent(documents, secrets, admitted.content, now);
  if (!opened) throw new RelayError('content_expired', `the bodies of email ${emailId} were destroyed after the retention period; its timeline and recipients remain`);
  return {
    id: admitted.emailId,
    from: admitted.from,
    to: admitted.to,
    cc: admitted.cc,
    replyTo: admitted.replyTo,
    subject: admitted.subject,
    headers: admitted.headers,
    html: opened.content.html,
    text: opened.content.text,
    retainedUntil: opened.expiresAt,
  };
}
