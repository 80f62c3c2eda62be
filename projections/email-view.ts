// The email read model: one document per email serving both the list (EmailSummary) and
// the detail (EmailDetail) reads. Pure: (view, event) → view. Bodies and BCC never enter it.
import type { AdmittedMessage, EmailEvent, RecordedEmailEvent } from '../domain/email/events.ts';
import type { Status } from '../domain/email/status.ts';

export interface TimelineEntry {
  id: string;
  type: string;
  occurredAt: string;
  payload: Record<string, unknown>;
}

export interface RecipientStatus {
  address: string;
  status: Status;
  occurredAt: string;
}

export interface WebhookAttemptLog {
  number: number;
  httpStatus: number | null;
  errorCode: string | null;
  durationMs: number;
  createdAt: string;
}

export interface WebhookDeliveryView {
  id: string;
  eventId: string;
  status: string;
  nextAttemptAt: string | null;
  attemptLogs: WebhookAttemptLog[];
}

export interface EmailView {
  _id: string;
  projectId: string;
  workspaceId: string;
  apiKeyId: string;
  fromAddress: string;
  fromDomain: string;
  /** Normalized To addresses: what the `recipient` filter matches. */
  toAddresses: string[];
  to: string[];
  cc: string[];
  replyTo: string | null;
  subject: string;
  status: Status;
  testMode: boolean;
  failureCode: string | null;
  createdAt: string;
  sentAt: string | null;
  deliveredAt: string | null;
  providerMessageId: string | null;
  recipients: RecipientStatus[];
  webhookDeliveries: WebhookDeliveryView[];
  metadata: Record<string, unknown>;
  tags: Record<string, string>;
  events: TimelineEntry[];
  /** Revision of the last stream event applied: the guard that makes replays no-ops. */
  streamRevision: number;
}

/** Timeline names of events; internal names stay internal. */
const timelineType: Record<EmailEvent['type'], string> = {
  EmailAccepted: 'email.queued',
  EmailSuppressed: 'email.suppressed',
};

function admitted(message: AdmittedMessage, status: Status, event: RecordedEmailEvent, payload: Record<string, unknown>): EmailView {
  return {
    _id: message.emailId,
    projectId: message.projectId,
    workspaceId: message.workspaceId,
    apiKeyId: message.apiKeyId,
    fromAddress: message.fromAddress,
    fromDomain: message.fromDomain,
    toAddresses: message.toAddresses,
    to: message.to,
    cc: message.cc,
    replyTo: message.replyTo,
    subject: message.subject,
    status,
    testMode: message.testMode,
    failureCode: null,
    createdAt: message.occurredAt,
    sentAt: null,
    deliveredAt: null,
    providerMessageId: null,
    // BCC recipients are left out here as everywhere in reads.
    recipients: [...message.toAddresses, ...message.ccAddresses].map((address) => ({ address, status, occurredAt: message.occurredAt })),
    webhookDeliveries: [],
    metadata: message.metadata,
    tags: message.tags,
    events: [{ id: event.id, type: timelineType[event.type], occurredAt: message.occurredAt, payload }],
    streamRevision: event.revision,
  };
}

/**
 * Applies one event of an email's stream. Returns the same object when the event changes
 * nothing (already applied, or unknown to this version), so callers can skip the write.
 */
export function applyToEmailView(view: EmailView | null, event: RecordedEmailEvent): EmailView | null {
  if (view && event.revision <= view.streamRevision) return view;
  switch (event.type) {
    case 'EmailAccepted': {
      const data = event.data;
      return admitted(data, 'queued', event, { recipients: data.recipientCount });
    }
    case 'EmailSuppressed': {
      const data = event.data;
      // A suppressed BCC recipient is named only by count, never by address.
      const visible = new Set([...data.toAddresses, ...data.ccAddresses]);
      return admitted(data, 'suppressed', event, {
        reason: visible.has(data.suppressedRecipients[0]?.address) ? data.reason : 'a recipient is suppressed',
        suppressedRecipients: data.suppressedRecipients.filter((r) => visible.has(r.address)),
      });
    }
    default:
      // An event this version does not know: skip it, but do not apply it again.
      return view ? { ...view, streamRevision: (event as RecordedEmailEvent).revision } : view;
  }
}
