// What each event of an email's stream means for a reader: which recipients' status it moves,
// how (docs/event-status-rules.md), and what the timeline and the webhooks make of it. Read by
// the event catalog (apps/services/event-catalog.ts); a new event type without an entry here
// fails the typecheck.
import type { WebhookEventType } from '../webhooks/events.ts';
import { OUTCOME_EVENT } from './outcomes.ts';
import type { EmailEventType } from './events.ts';
import type { Status } from './status.ts';

export interface EmailEventMeaning {
  summary: string;
  /** The recipient statuses it can give. */
  statuses: readonly Status[];
  /** How it merges them: set (admission), replace (the sender's outcomes), only_up (reports), none. */
  merge: 'set' | 'replace' | 'only_up' | 'none';
  /** Timeline entry types of GET /v1/emails/{id}. */
  timeline: readonly string[];
  /** Webhook event types, besides the statuses' own (email.suppressed has no status event of its own). */
  extraWebhooks?: readonly WebhookEventType[];
}

export const EMAIL_EVENT_MEANINGS: Record<EmailEventType, EmailEventMeaning> = {
  EmailAccepted: { summary: 'The email was admitted for delivery: every recipient is queued.', statuses: ['queued'], merge: 'set', timeline: ['email.queued'] },
  EmailSuppressed: {
    summary: 'The email was admitted but not sent: a recipient is on the suppression list. No event follows.',
    statuses: ['suppressed'], merge: 'set', timeline: ['email.suppressed'], extraWebhooks: ['email.suppressed'],
  },
  DeliveryClaimed: { summary: 'A sender instance took the next delivery attempt (or took over one whose transaction never began); recipients Relay is not done sending to (never final yet) become processing.', statuses: ['processing'], merge: 'replace', timeline: ['email.processing'] },
  DeliveryTransactionStarted: {
    summary: "The claim's holder begins the transaction for these recipients: from here the message may go out (only these can end delivery_unknown). Changes no status.",
    statuses: [], merge: 'none', timeline: [],
  },
  DeliveryAttempted: {
    summary: "One attempt's outcome per recipient (by index; a failed or rejected one's own failure code), and when the next attempt is due if some were delayed. " +
      'A recipient marked reportedFirst keeps what the report recorded before it makes of this outcome.',
    statuses: ['sent', 'delivered', 'delayed', 'hard_bounced', 'soft_bounced', 'rejected', 'failed'], merge: 'replace',
    timeline: ['email.sent', 'email.delivered', 'email.delayed', 'email.bounced', 'email.rejected', 'email.failed'],
  },
  DeliveryFailed: {
    summary: 'Delivery ended without an attempt outcome for the recipients still pending (delivery_unknown, content_expired, sender_domain_unavailable, message_unbuildable). ' +
      'A recipient marked reportedFirst keeps what the report recorded before it makes of this outcome.',
    statuses: ['failed'], merge: 'replace', timeline: ['email.failed'],
  },
  RecipientReported: {
    summary: 'A report (DSN, ARF complaint, bounce text) about one recipient came back to its return path (one event per recipient its copy was sent for); ' +
      'undetermined reports change nothing. It moves a recipient only up, except that it replaces failed (written only by the sender).',
    statuses: ['delivered', 'delayed', 'soft_bounced', 'hard_bounced', 'complained'], merge: 'only_up',
    timeline: ['email.delivered', 'email.delayed', 'email.bounced', 'email.complained'],
  },
  RecipientReportRepeated: {
    summary: 'A report that said nothing new about its recipient (the same outcome again): counted on the recipient, no status change, no timeline entry of its own, no webhook.',
    statuses: [], merge: 'none', timeline: [],
  },
};

/** The webhook event types an email event can produce. */
export function webhookTypesOf(type: EmailEventType): WebhookEventType[] {
  const meaning = EMAIL_EVENT_MEANINGS[type];
  const fromStatuses = meaning.statuses.flatMap((s) => (OUTCOME_EVENT[s] ? [OUTCOME_EVENT[s]!] : []));
  return [...new Set([...fromStatuses, ...(meaning.extraWebhooks ?? [])])];
}
