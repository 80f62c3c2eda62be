// The email read model: one document per email serving both the list (EmailSummary) and
// the detail (EmailDetail) reads. Pure: (view, event) → view. Bodies and BCC never enter it.
import type { AdmittedMessage, RecordedEmailEvent } from '../domain/email/events.ts';
import {
  OUTCOME_EVENT, outcomesOf, shownProviderMessageId, shownSuppression, statusAfter, statusOnClaim, type EventOutcomes, type OutcomeGroup, type RecipientOutcome,
} from '../domain/email/outcomes.ts';
import { emailStatusOf, isFinalDeliveryStatus, type Status } from '../domain/email/status.ts';

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
  /**
   * Indexes of the visible recipients Relay is done sending to (one once had a final status:
   * domain/email/state.ts, done): a claim leaves them as they are. Internal, never returned;
   * absent on documents written before it (their final statuses say the same then).
   */
  doneRecipients?: number[];
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
    doneRecipients: [],
  };
}

/**
 * Sets the outcomes of visible recipients and the email's status from theirs
 * (domain/email/outcomes.ts, domain/email/status.ts); recipients without an address (BCC) are
 * tracked by the deciders, not shown here.
 */
function withStatuses(
  view: EmailView, statusOf: (current: Status, index: number) => Status, occurredAt: string, reached: Status[] = [], madeFinal: ReadonlySet<number> = new Set(),
): EmailView {
  const recipients = view.recipients.map((r, index) => {
    const status = statusOf(r.status, index);
    return status === r.status ? r : { ...r, status, occurredAt };
  });
  const doneRecipients = recipients.flatMap((r, index) => (isDone(view, index) || madeFinal.has(index) || isFinalDeliveryStatus(r.status) ? [index] : []));
  return {
    ...view,
    recipients,
    doneRecipients,
    status: emailStatusOf(recipients.map((r) => r.status), 'queued'),
    sentAt: view.sentAt ?? (reached.some((s) => s === 'sent' || s === 'delivered') ? occurredAt : null),
    deliveredAt: view.deliveredAt ?? (reached.includes('delivered') ? occurredAt : null),
  };
}

/** Whether Relay is done sending to visible recipient `index` (domain/email/state.ts, isDoneSending). */
const isDone = (view: EmailView, index: number): boolean =>
  (view.doneRecipients?.includes(index) ?? false) || isFinalDeliveryStatus(view.recipients[index]?.status ?? 'queued');

function withOutcomes(view: EmailView, outcomes: RecipientOutcome[], occurredAt: string): EmailView {
  const byIndex = new Map(outcomes.map((o) => [o.index, o]));
  const statusOf = (current: Status, index: number) => {
    const outcome = byIndex.get(index);
    return outcome ? statusAfter(current, outcome) : current;
  };
  // An outcome that is final ends the sending even when a report recorded first still shows (domain/email/state.ts, done).
  const madeFinal = new Set(outcomes.filter((o) => isFinalDeliveryStatus(o.status)).map((o) => o.index));
  return withStatuses(view, statusOf, occurredAt, outcomes.filter((o) => o.address !== null).map((o) => o.status), madeFinal);
}

/** One timeline entry per outcome group that names a visible recipient; outcomes of BCC recipients alone stay off the timeline. */
function outcomeEntries(eventId: string, occurredAt: string, groups: OutcomeGroup[], common: Record<string, unknown>): TimelineEntry[] {
  return groups.filter((g) => g.shown.length > 0).map((g) => ({
    id: `${eventId}:${g.status}`,
    type: g.type,
    occurredAt,
    payload: { ...common, ...(g.failureCode ? { failureCode: g.failureCode } : {}), ...g.detail, recipients: g.shown.map((o) => o.shownAs) },
  }));
}

/**
 * Timeline entries a document keeps at most: the admission's, then (once some are left out) one
 * `email.events_folded` entry counting them, then the latest. An email's stream is bounded
 * (domain/email/feedback.ts caps reports), this bounds what one read returns.
 */
export const MAX_TIMELINE_ENTRIES = 100;
export const FOLDED_ENTRIES_TYPE = 'email.events_folded';

function appendEntries(events: TimelineEntry[], added: TimelineEntry[]): TimelineEntry[] {
  if (added.length === 0) return events;
  const all = [...events, ...added];
  if (all.length <= MAX_TIMELINE_ENTRIES) return all;
  const [first, ...rest] = all;
  const marker = rest[0]?.type === FOLDED_ENTRIES_TYPE ? rest.shift()! : null;
  const dropped = rest.splice(0, rest.length - (MAX_TIMELINE_ENTRIES - 2));
  const count = Number(marker?.payload.count ?? 0) + dropped.length;
  return [first, { id: `${first.id}:folded`, type: FOLDED_ENTRIES_TYPE, occurredAt: dropped[dropped.length - 1].occurredAt, payload: { count } }, ...rest];
}

/** The timeline entry of the latest recorded report of `outcome` about `address`, counting one more that said the same. */
function countRepeat(events: TimelineEntry[], address: string, outcome: Status): TimelineEntry[] {
  const type = OUTCOME_EVENT[outcome];
  for (let i = events.length - 1; i >= 0; i--) {
    const entry = events[i];
    const about = (entry.payload.recipients as Array<{ address?: string }> | undefined)?.[0]?.address;
    if (entry.type !== type || entry.payload.source === undefined || about !== address) continue;
    const repeated = { ...entry, payload: { ...entry.payload, repeated: Number(entry.payload.repeated ?? 0) + 1 } };
    return [...events.slice(0, i), repeated, ...events.slice(i + 1)];
  }
  return events;
}

/** What a timeline entry of an outcome says beyond its group (attempt, transport, next attempt; a report's source and text): the failure code is its group's. */
function commonOf(event: RecordedEmailEvent & { type: 'DeliveryAttempted' | 'DeliveryFailed' | 'RecipientReported' }, outcomes: EventOutcomes): Record<string, unknown> {
  switch (event.type) {
    case 'DeliveryAttempted': {
      const { attempt, transport } = event.data;
      const { shownNextAttemptAt: nextAttemptAt } = outcomes;
      return { attempt, transport, ...(nextAttemptAt ? { nextAttemptAt } : {}) };
    }
    case 'DeliveryFailed':
      return { attempt: event.data.attempt };
    case 'RecipientReported':
      return { source: event.data.format, reason: event.data.reason };
  }
}

/** Event types that never change the view: its live processor skips them (apps/services/stream-projection.ts, ignores). */
export const EMAIL_VIEW_IGNORES = ['DeliveryTransactionStarted'] as const;

/**
 * Applies one event of an email's stream. Returns the same object when the event changes
 * nothing (already applied, or unknown to this version: its revision is not recorded either),
 * so callers can skip the write.
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
      const shown = shownSuppression(event.data);
      return admitted(event.data, 'suppressed', event, { reason: shown.reason, suppressedRecipients: shown.recipients });
    }
  }
  // Lifecycle events of an email whose admission is not projected yet cannot be placed (the
  // writer fills such gaps from the store first).
  if (!view) return view;
  const advanced = { ...view, streamRevision: event.revision };
  switch (event.type) {
    case 'DeliveryClaimed': {
      const { attempt, transport, occurredAt } = event.data;
      const claimed = withStatuses(advanced, (current, index) => statusOnClaim(current, isDone(view, index)), occurredAt);
      // An entry only when the attempt is for a visible recipient: one for BCC recipients alone shows nothing.
      const forVisible = claimed.recipients.some((r, index) => !isDone(view, index) && r.status === 'processing');
      return {
        ...claimed,
        events: forVisible ? appendEntries(view.events, [{ id: event.id, type: 'email.processing', occurredAt, payload: { attempt, transport } }]) : view.events,
      };
    }
    case 'DeliveryAttempted':
    case 'DeliveryFailed':
    case 'RecipientReported': {
      const outcomes = outcomesOf(event);
      const occurredAt = event.data.occurredAt;
      const next = withOutcomes(advanced, outcomes.recipients, occurredAt);
      return {
        ...next,
        providerMessageId: (event.type === 'DeliveryAttempted' && shownProviderMessageId(event.data)) || view.providerMessageId,
        failureCode: view.failureCode ?? outcomes.shownFailureCode,
        events: appendEntries(view.events, outcomeEntries(event.id, occurredAt, outcomes.groups, commonOf(event, outcomes))),
      };
    }
    case 'DeliveryTransactionStarted':
      // The sender's mark before a transaction: nothing a reader sees (EMAIL_VIEW_IGNORES).
      return view;
    case 'RecipientReportRepeated': {
      const { address, outcome } = event.data;
      if (address === null || outcome === 'undetermined') return advanced;
      return { ...advanced, events: countRepeat(view.events, address, outcome) };
    }
    default:
      // An event this version does not know (written by a newer Relay): skip it, revision
      // included, as DeliveryTransactionStarted. The live projector never receives it (its
      // consumer takes the known types only), so a rebuild must not advance over it either;
      // the next known event reads it again as part of its gap and skips it again.
      return view;
  }
}
