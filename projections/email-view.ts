// The email read model: one document per email serving both the list (EmailSummary) and
// the detail (EmailDetail) reads. Pure: (view, event) → view. Bodies and BCC never enter it.
import { OUTCOME_EVENT } from '../domain/webhooks/events.ts';
import type { AdmittedMessage, RecordedEmailEvent } from '../domain/email/events.ts';
import { emailStatusOf, isFinalDeliveryStatus, supersede, type Status } from '../domain/email/status.ts';

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

/** Timeline names of admission events; internal names stay internal. */
const admissionTimelineType = { EmailAccepted: 'email.queued', EmailSuppressed: 'email.suppressed' } as const;


function admitted(message: AdmittedMessage, status: Status, event: RecordedEmailEvent & { type: keyof typeof admissionTimelineType }, payload: Record<string, unknown>): EmailView {
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
    events: [{ id: event.id, type: admissionTimelineType[event.type], occurredAt: message.occurredAt, payload }],
    streamRevision: event.revision,
  };
}

interface RecipientOutcomeEntry {
  index: number;
  address: string | null;
  status: Status;
  smtpCode?: number | null;
  enhancedCode?: string | null;
  response?: string;
}

/**
 * Sets the outcomes of visible recipients and the email's status from theirs (the rules of
 * domain/email/status.ts); recipients without an address (BCC) are tracked by the deciders,
 * not shown here.
 */
function withOutcomes(view: EmailView, outcomes: RecipientOutcomeEntry[], occurredAt: string, merge: 'replace' | 'supersede' = 'replace'): EmailView {
  const recipients = view.recipients.map((r, index) => {
    const outcome = outcomes.find((o) => o.index === index);
    if (!outcome) return r;
    const status = merge === 'replace' ? outcome.status : supersede(r.status, outcome.status);
    return status === r.status ? r : { ...r, status, occurredAt };
  });
  const reached = (wanted: Status[]) => outcomes.some((o) => o.address !== null && wanted.includes(o.status));
  return {
    ...view,
    recipients,
    status: emailStatusOf(recipients.map((r) => r.status), 'queued'),
    sentAt: view.sentAt ?? (reached(['sent', 'delivered']) ? occurredAt : null),
    deliveredAt: view.deliveredAt ?? (reached(['delivered']) ? occurredAt : null),
  };
}

/** One timeline entry per outcome among the visible recipients; outcomes of BCC recipients alone stay off the timeline. */
function outcomeEntries(eventId: string, occurredAt: string, outcomes: RecipientOutcomeEntry[], common: Record<string, unknown>): TimelineEntry[] {
  const byStatus = new Map<Status, RecipientOutcomeEntry[]>();
  for (const o of outcomes) if (o.address !== null) byStatus.set(o.status, [...(byStatus.get(o.status) ?? []), o]);
  return [...byStatus].flatMap(([status, list]) => {
    const type = OUTCOME_EVENT[status];
    if (!type) return [];
    const bounce = status === 'hard_bounced' ? { bounce_type: 'hard' }
      : status === 'soft_bounced' ? { bounce_type: 'soft' }
        : status === 'delayed' ? { delay_type: 'retry' } : {};
    return [{
      id: `${eventId}:${status}`,
      type,
      occurredAt,
      payload: {
        ...common,
        ...bounce,
        recipients: list.map(({ address, smtpCode, enhancedCode, response }) => ({ address, smtpCode: smtpCode ?? null, enhancedCode: enhancedCode ?? null, response: response ?? null })),
      },
    }];
  });
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
      // The count leaves BCC out: a timeline must not tell that there was one.
      return admitted(data, 'queued', event, { recipients: data.toAddresses.length + data.ccAddresses.length });
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
  }
  // Lifecycle events of an email whose admission is not projected yet cannot be placed (the
  // writer fills such gaps from the store first).
  if (!view) return view;
  const advanced = { ...view, streamRevision: event.revision };
  switch (event.type) {
    case 'DeliveryClaimed': {
      const { attempt, transport, occurredAt } = event.data;
      const pending = view.recipients.flatMap((r, index) => (isFinalDeliveryStatus(r.status) ? [] : [{ index, address: r.address, status: 'processing' as const }]));
      return {
        ...withOutcomes(advanced, pending, occurredAt),
        events: [...view.events, { id: event.id, type: 'email.processing', occurredAt, payload: { attempt, transport } }],
      };
    }
    case 'DeliveryAttempted': {
      const { attempt, transport, recipients, occurredAt, nextAttemptAt, failureCode, providerMessageId } = event.data;
      // What comes from BCC recipients alone (a retry, a failure) must not show: it would
      // tell that there is one.
      const visible = recipients.filter((r) => r.address !== null);
      const visibleRetry = visible.some((r) => r.status === 'delayed') ? nextAttemptAt : null;
      const visibleFailure = visible.some((r) => r.status === 'failed' || r.status === 'rejected') ? failureCode : null;
      const common = { attempt, transport, ...(visibleRetry ? { nextAttemptAt: visibleRetry } : {}), ...(visibleFailure ? { failureCode: visibleFailure } : {}) };
      const next = withOutcomes(advanced, recipients, occurredAt);
      return {
        ...next,
        providerMessageId: providerMessageId ?? view.providerMessageId,
        failureCode: view.failureCode ?? visibleFailure,
        events: [...view.events, ...outcomeEntries(event.id, occurredAt, recipients, common)],
      };
    }
    case 'DeliveryFailed': {
      const { failureCode, reason, recipients, occurredAt, attempt } = event.data;
      const outcomes = recipients.map((r) => ({ ...r, status: 'failed' as const, response: reason }));
      return {
        ...withOutcomes(advanced, outcomes, occurredAt),
        failureCode: view.failureCode ?? (recipients.some((r) => r.address !== null) ? failureCode : null),
        events: [...view.events, ...outcomeEntries(event.id, occurredAt, outcomes, { attempt, failureCode })],
      };
    }
    case 'RecipientReported': {
      const { outcome, address, recipientIndex, occurredAt, status, diagnosticCode, reason, complaintType, format } = event.data;
      // Undetermined reports are kept in the stream and change nothing here; reports about a
      // BCC recipient never show.
      if (outcome === 'undetermined' || address === null) return advanced;
      const next = withOutcomes(advanced, [{ index: recipientIndex, address, status: outcome }], occurredAt, 'supersede');
      const type = OUTCOME_EVENT[outcome]!;
      const detail = outcome === 'hard_bounced' ? { bounce_type: 'hard' }
        : outcome === 'soft_bounced' ? { bounce_type: 'soft' }
          : outcome === 'complained' ? { complaint_type: complaintType ?? 'abuse' }
            : outcome === 'delayed' ? { delay_type: 'reported' } : {};
      return {
        ...next,
        events: [...view.events, {
          id: `${event.id}:${outcome}`,
          type,
          occurredAt,
          payload: { source: format, ...detail, reason, recipients: [{ address, status, diagnosticCode }] },
        }],
      };
    }
    default:
      // An event this version does not know: skip it, but do not apply it again.
      return advanced;
  }
}
