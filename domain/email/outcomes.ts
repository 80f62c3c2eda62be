// What a customer sees of an email's outcomes, decided once for every place that shows them:
// the timeline and recipients of the `emails` read model (projections/email-view.ts), the
// webhook events (domain/webhooks/events.ts), and anything later (a dashboard, analytics).
// - which recipient outcomes an event of the stream records, and how a recipient's status
//   moves with each (the sender's attempts replace it, reports from outside only move it up or
//   past the sender's `failed`);
// - how outcomes are grouped (one group per status, in the order the event names them), the
//   name of each group (the timeline entry's type and the webhook's alike) and its detail
//   fields (bounce_type, delay_type, complaint_type, reason);
// - what is hidden: BCC recipients are never named (an outcome of BCC recipients alone makes a
//   group with nobody in it), a failure code shows only when a shown recipient failed (each
//   recipient's own: a BCC recipient's never becomes a shown one's), and a suppression names
//   only To and CC recipients.
import type { DeliveryAttempted, EmailSuppressed, RecordedEmailEvent, SuppressedRecipient } from './events.ts';
import { isFinalDeliveryStatus, supersede, type Status } from './status.ts';
import { cutText } from '../text.ts';

export const OUTCOME_EVENT_TYPES = [
  'email.sent', 'email.delivered', 'email.bounced', 'email.complained', 'email.rejected', 'email.failed', 'email.delayed',
] as const;

export type OutcomeEventType = (typeof OUTCOME_EVENT_TYPES)[number];

/** The event name of each recipient outcome: the webhook's type and the timeline entry's alike. */
export const OUTCOME_EVENT: Partial<Record<Status, OutcomeEventType>> = {
  sent: 'email.sent',
  delivered: 'email.delivered',
  rejected: 'email.rejected',
  hard_bounced: 'email.bounced',
  soft_bounced: 'email.bounced',
  delayed: 'email.delayed',
  failed: 'email.failed',
  complained: 'email.complained',
};

/** Where an outcome comes from: the sender's own attempts, in order, or a report from outside, in any order. */
export type OutcomeSource = 'attempt' | 'report';

/** One recipient's outcome as an event records it. */
export interface RecipientOutcome {
  /** The recipient's position in the request (To, then CC, then BCC). */
  index: number;
  /** Null for a BCC recipient: never shown. */
  address: string | null;
  status: Status;
  source: OutcomeSource;
  /** What the customer may read of it: the SMTP reply, the failure's reason, or the report's status and text. */
  reason: string;
  /** Why it failed or was rejected (delivery_unknown, provider_rejected, …); null for other outcomes. */
  failureCode: string | null;
  /** How a shown recipient appears in a timeline entry: the reply's codes, or the report's status and diagnostic. */
  shownAs: Record<string, unknown>;
  /**
   * A sender's outcome recorded after a report about the same recipient that was written after
   * it (a delay the provider reported once it had accepted this attempt's copy, recorded while
   * the attempt was still open): the report is the newer fact.
   */
  reportedFirst: boolean;
}

/**
 * What a report makes of a recipient's status. Reports arrive in any order, so they only move
 * it up; `failed` is the exception: only the sender writes it (a transaction whose fate it could
 * not learn, a provider that never took the message), never after a delivery of that recipient,
 * so whatever a report says of the copy is news over it.
 */
const reportedOver = (current: Status, reported: Status): Status => (current === 'failed' ? reported : supersede(current, reported));

/**
 * A recipient's status after an outcome: the sender's attempts replace it (a retry that succeeds
 * ends a delay), reports move it as reportedOver says, and a sender's outcome that a report
 * recorded first had followed gives what that report would have made of it.
 */
export function statusAfter(current: Status, outcome: Pick<RecipientOutcome, 'status' | 'source'> & Partial<Pick<RecipientOutcome, 'reportedFirst'>>): Status {
  if (outcome.source === 'report') return reportedOver(current, outcome.status);
  return outcome.reportedFirst ? reportedOver(outcome.status, current) : outcome.status;
}

/**
 * A recipient's status once an attempt is claimed: processing, unless it has a final one or
 * Relay is done sending to it (`done`: it once had a final one, e.g. `sent` before a reported delay).
 */
export const statusOnClaim = (current: Status, done = false): Status => (done || isFinalDeliveryStatus(current) ? current : 'processing');

export interface OutcomeDetail {
  bounce_type?: 'hard' | 'soft';
  delay_type?: 'retry' | 'reported';
  complaint_type?: string;
}

/** The detail fields of an outcome: a bounce's type, a delay's origin, a complaint's ARF Feedback-Type. */
export function detailOf(status: Status, source: OutcomeSource, complaintType: string | null = null): OutcomeDetail {
  switch (status) {
    case 'hard_bounced': return { bounce_type: 'hard' };
    case 'soft_bounced': return { bounce_type: 'soft' };
    case 'delayed': return { delay_type: source === 'attempt' ? 'retry' : 'reported' };
    case 'complained': return { complaint_type: complaintType ?? 'abuse' };
    default: return {};
  }
}

/** Recipients of one event with one outcome. */
export interface OutcomeGroup {
  status: Status;
  type: OutcomeEventType;
  /** The recipients that may be shown (To, CC); empty when the outcome concerns BCC recipients alone. */
  shown: RecipientOutcome[];
  detail: OutcomeDetail;
  /**
   * For failed and rejected, the failure code of its shown recipients (of its BCC recipients
   * when it has no shown one), the first in the order named; null otherwise.
   */
  failureCode: string | null;
  /** For failed and rejected, the failure codes first (those of failureCode, distinct); then each shown recipient's distinct reason; null when there is none. */
  reason: string | null;
}

/** What one event of the stream says about recipients' outcomes. */
export interface EventOutcomes {
  /** Every recipient it concerns, BCC included (statuses follow them all). */
  recipients: RecipientOutcome[];
  /** One group per status, in the order the event first names it. */
  groups: OutcomeGroup[];
  /** The failure code of the first shown recipient that failed or was rejected; null when none did. */
  shownFailureCode: string | null;
  /** When the next attempt is due, when a shown recipient waits for it; null otherwise. */
  shownNextAttemptAt: string | null;
}

const REASON_LIMIT = 1000;
const isFailure = (status: Status) => status === 'failed' || status === 'rejected';
const isShown = (outcome: RecipientOutcome) => outcome.address !== null;

function grouped(recipients: RecipientOutcome[], complaintType: string | null): OutcomeGroup[] {
  const groups = new Map<Status, OutcomeGroup & { all: RecipientOutcome[] }>();
  for (const outcome of recipients) {
    const type = OUTCOME_EVENT[outcome.status];
    if (!type) continue;
    let group = groups.get(outcome.status);
    if (!group) {
      group = { status: outcome.status, type, shown: [], all: [], detail: detailOf(outcome.status, outcome.source, complaintType), failureCode: null, reason: null };
      groups.set(outcome.status, group);
    }
    group.all.push(outcome);
    if (isShown(outcome)) group.shown.push(outcome);
  }
  return [...groups.values()].map(({ all, ...group }) => {
    // A group's code is its shown recipients': a BCC recipient's code shows only in a group of BCC recipients alone.
    const coded = isFailure(group.status) ? (group.shown.length > 0 ? group.shown : all) : [];
    const codes = [...new Set(coded.map((o) => o.failureCode).filter((code): code is string => Boolean(code)))];
    const reasons = [...new Set(group.shown.map((o) => o.reason).filter(Boolean))];
    const reason = cutText([...codes, ...reasons].join('; '), REASON_LIMIT);
    return { ...group, failureCode: codes[0] ?? null, reason: reason || null };
  });
}

function outcomes(recipients: RecipientOutcome[], nextAttemptAt: string | null, complaintType: string | null = null): EventOutcomes {
  const shown = recipients.filter(isShown);
  return {
    recipients,
    groups: grouped(recipients, complaintType),
    shownFailureCode: shown.find((r) => isFailure(r.status) && r.failureCode)?.failureCode ?? null,
    shownNextAttemptAt: shown.some((r) => r.status === 'delayed') ? nextAttemptAt : null,
  };
}

const NO_OUTCOMES: EventOutcomes = { recipients: [], groups: [], shownFailureCode: null, shownNextAttemptAt: null };

/** The recipient outcomes an event records; none for events that record no outcome (admission, claims, undetermined reports). */
export function outcomesOf(event: RecordedEmailEvent): EventOutcomes {
  switch (event.type) {
    case 'DeliveryAttempted': {
      const { recipients, failureCode, nextAttemptAt } = event.data;
      return outcomes(recipients.map(({ index, address, status, smtpCode, enhancedCode, response, providerMessageId, failureCode: own, reportedFirst }) => ({
        index, address, status, source: 'attempt', reason: response, reportedFirst: reportedFirst === true,
        // Each recipient's own code; events from before it was kept have only the attempt's one.
        failureCode: isFailure(status) ? own ?? failureCode : null,
        // Each recipient's own transaction's queue id, when it was accepted (INTERFACE-DECISIONS: queue ids).
        shownAs: { address, smtpCode, enhancedCode, response, ...(providerMessageId ? { providerMessageId } : {}) },
      })), nextAttemptAt);
    }
    case 'DeliveryFailed': {
      const { recipients, failureCode, reason } = event.data;
      return outcomes(recipients.map(({ index, address, reportedFirst }) => ({
        index, address, status: 'failed', source: 'attempt', reason, failureCode, reportedFirst: reportedFirst === true,
        shownAs: { address, smtpCode: null, enhancedCode: null, response: reason },
      })), null);
    }
    case 'RecipientReported': {
      const { outcome, recipientIndex, address, status, diagnosticCode, reason, complaintType } = event.data;
      if (outcome === 'undetermined') return NO_OUTCOMES;
      return outcomes([{
        index: recipientIndex, address, status: outcome, source: 'report', reason: [status, reason].filter(Boolean).join(' '), failureCode: null, reportedFirst: false,
        shownAs: { address, status, diagnosticCode },
      }], null, complaintType);
    }
    default:
      return NO_OUTCOMES;
  }
}

/**
 * The queue id an attempt shows as the email's providerMessageId: the first visible (To, CC)
 * recipient's that was accepted; null when only BCC recipients were. Events from before
 * per-recipient queue ids were kept hold only the attempt's one, which stands then.
 */
export function shownProviderMessageId(data: DeliveryAttempted['data']): string | null {
  if (!data.recipients.some((r) => r.providerMessageId !== undefined)) return data.providerMessageId;
  return data.recipients.find((r) => r.address !== null && r.providerMessageId)?.providerMessageId ?? null;
}

/** What may be shown of a suppression: its reason only when it names a To or CC recipient, and only those recipients. */
export function shownSuppression(data: EmailSuppressed['data']): { reason: string; recipients: SuppressedRecipient[] } {
  const visible = new Set([...data.toAddresses, ...data.ccAddresses]);
  const recipients = data.suppressedRecipients.filter((r) => visible.has(r.address));
  // The reason names the first suppressed recipient: a BCC one must not show.
  return { reason: visible.has(data.suppressedRecipients[0]?.address) ? data.reason : 'a recipient is suppressed', recipients };
}
