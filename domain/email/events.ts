// Events of an email's stream (`email-<id>`). Event data is what the event store keeps
// forever, so it never holds message bodies or BCC in clear: those travel in `content`,
// sealed with a per-email key that is destroyed after the retention period.
import type { ReportOutcome } from '../feedback/classify.ts';
import type { Status } from './status.ts';

export const EMAIL_STREAM_PREFIX = 'email-';
export const emailStreamId = (emailId: string): string => `${EMAIL_STREAM_PREFIX}${emailId}`;
/** The email an event of stream `email-<id>` belongs to. */
export const emailIdOfStream = (streamId: string): string => streamId.slice(EMAIL_STREAM_PREFIX.length);

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

/**
 * A sender instance took the email's next delivery attempt: only the instance whose claim was
 * appended (expected revision) sends. A claim with no attempt after it means the sender died
 * mid-attempt: the message may have gone out, so it is never sent again (delivery_unknown).
 */
export type DeliveryClaimed = {
  type: 'DeliveryClaimed';
  data: { attempt: number; claimedBy: string; transport: string; occurredAt: string };
};

/**
 * What one recipient's transaction came to, by recipient index (To, then CC, then BCC, as
 * admitted). `address` is null for BCC recipients: their addresses are never in an event.
 */
export interface RecipientAttempt {
  index: number;
  address: string | null;
  status: Status;
  smtpCode: number | null;
  enhancedCode: string | null;
  /** The server's reply or the local error; never message content. */
  response: string;
}

/** The outcome of a claimed attempt, per recipient, and when the next one is due, if any. */
export type DeliveryAttempted = {
  type: 'DeliveryAttempted';
  data: {
    attempt: number;
    transport: string;
    messageId: string;
    providerMessageId: string | null;
    recipients: RecipientAttempt[];
    /** Set while recipients wait for a retry after a temporary failure. */
    nextAttemptAt: string | null;
    /** Why recipients failed for good, when some did: provider_unavailable, delivery_unknown, … */
    failureCode: string | null;
    occurredAt: string;
  };
};

/**
 * The email's delivery ended without an attempt outcome for the recipients still pending:
 * delivery_unknown (a claim was left open), content_expired (the body was destroyed before it
 * went out), sender_domain_unavailable (the domain or its DKIM key is gone).
 */
export type DeliveryFailed = {
  type: 'DeliveryFailed';
  data: { attempt: number; failureCode: string; reason: string; recipients: Array<{ index: number; address: string | null }>; occurredAt: string };
};

/** What a report about one recipient said (a DSN, an ARF complaint, a bounce in plain text). */
export type ReportedOutcome = ReportOutcome;

/**
 * A report that came back to the recipient's return path (VERP), about that recipient. Kept
 * even when it could not be classified (`undetermined`), which changes no status.
 */
export type RecipientReported = {
  type: 'RecipientReported';
  data: {
    /** The report's identity (its Message-ID, or a hash of its bytes): the same report twice changes nothing. */
    reportId: string;
    recipientIndex: number;
    /** Null for a BCC recipient. */
    address: string | null;
    outcome: ReportedOutcome;
    /** dsn (RFC 3464), arf (RFC 5965) or text (a bounce in another format). */
    format: 'dsn' | 'arf' | 'text';
    /** The enhanced status code the report gave, e.g. "5.1.1". */
    status: string | null;
    diagnosticCode: string | null;
    reason: string;
    /** ARF Feedback-Type (abuse, fraud, …) for a complaint. */
    complaintType: string | null;
    occurredAt: string;
  };
};

/**
 * A report that said nothing new about its recipient (the same outcome again, a delay after a
 * delay): counted, never shown as an entry of its own nor sent as a webhook.
 */
export type RecipientReportRepeated = {
  type: 'RecipientReportRepeated';
  data: {
    reportId: string;
    recipientIndex: number;
    /** Null for a BCC recipient. */
    address: string | null;
    outcome: ReportedOutcome;
    occurredAt: string;
  };
};

export type EmailEvent = EmailAccepted | EmailSuppressed | DeliveryClaimed | DeliveryAttempted | DeliveryFailed | RecipientReported | RecipientReportRepeated;
export type EmailEventType = EmailEvent['type'];

/** An event of a type this version does not know (written by a newer one): skipped, never guessed at. */
export type UnrecognizedEvent = { type: 'UnrecognizedEvent'; data: { type: string; schemaVersion?: number } };

/** An event as read back (through upcastEmailEvent): what deciders, projections and processors receive. */
export type RecordedEmailEvent = (EmailEvent | UnrecognizedEvent) & {
  id: string;
  streamId: string;
  revision: number;
};

/** When a recorded event happened; null for one this version cannot read. */
export const occurredAtOf = (event: RecordedEmailEvent): string | null => (event.type === 'UnrecognizedEvent' ? null : event.data.occurredAt);
