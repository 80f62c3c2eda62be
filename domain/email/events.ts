// Events of an email's stream (`email-<id>`). Event data is what the event store keeps
// forever, so it never holds message bodies or BCC in clear: those travel in `content`,
// sealed with a per-email key that is destroyed after the retention period.

export const emailStreamId = (emailId: string): string => `email-${emailId}`;
export const EMAIL_STREAM_PREFIX = 'email-';

/** Message bodies and BCC, encrypted; the key lives outside the event store and expires. */
export interface SealedContent {
  keyId: string;
  alg: 'A256GCM';
  iv: string;
  data: string;
  tag: string;
}

/** What the sealed content holds once opened. */
export interface EmailContent {
  html: string | null;
  text: string | null;
  bcc: string[];
}

export interface TemplateReference {
  id: string;
  slug: string;
  revision: number;
}

/** The admitted message, common to accepted and suppressed emails. */
export interface AdmittedMessage {
  emailId: string;
  projectId: string;
  workspaceId: string;
  apiKeyId: string;
  testMode: boolean;
  /** sha256 of the canonical request body: idempotent replays must match it. */
  fingerprint: string;
  idempotencyKey: string | null;
  from: string;
  fromAddress: string;
  fromDomain: string;
  /** Mailboxes as written (trimmed); *Addresses hold the normalized addresses. */
  to: string[];
  toAddresses: string[];
  cc: string[];
  ccAddresses: string[];
  bccCount: number;
  replyTo: string | null;
  subject: string;
  headers: Record<string, string>;
  tags: Record<string, string>;
  metadata: Record<string, unknown>;
  template: TemplateReference | null;
  /** To + CC + BCC: what the monthly allowance is charged. */
  recipientCount: number;
  content: SealedContent;
  occurredAt: string;
}

export interface SuppressedRecipient {
  address: string;
  reason: string;
}

export type EmailAccepted = { type: 'EmailAccepted'; data: AdmittedMessage };
export type EmailSuppressed = {
  type: 'EmailSuppressed';
  data: AdmittedMessage & { suppressedRecipients: SuppressedRecipient[]; reason: string };
};

export type EmailEvent = EmailAccepted | EmailSuppressed;
export type EmailEventType = EmailEvent['type'];

/** An event as read back: what projections and processors receive. */
export type RecordedEmailEvent = EmailEvent & {
  id: string;
  streamId: string;
  revision: number;
};
