// Webhook events (spec: Events): which email events become which webhook events, with the
// spec's payload. One email event may give several webhook events (recipients of one attempt
// with different outcomes); each has an id derived from the email event's id, so it is the
// same across retries, replays, rebalances and rebuilds, and the same for every endpoint.
// What an outcome shows (grouping, detail fields, what stays hidden) is domain/email/outcomes.ts,
// which the timeline follows too.
import type { RecordedEmailEvent } from '../email/events.ts';
import { OUTCOME_EVENT_TYPES, outcomesOf, shownSuppression, type OutcomeDetail } from '../email/outcomes.ts';
import type { EmailState } from '../email/state.ts';
import type { Status } from '../email/status.ts';

export const WEBHOOK_EVENT_TYPES = [...OUTCOME_EVENT_TYPES, 'email.suppressed'] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const isWebhookEventType = (value: unknown): value is WebhookEventType =>
  typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);

export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created_at: string;
  data: OutcomeDetail & {
    email_id: string;
    project_id: string;
    test_mode: boolean;
    status: Status;
    recipients: string[];
    provider_message_id: string | null;
    reason?: string;
  };
}

/**
 * The webhook events an email event gives, from the email's state right after it (its status is
 * the payload's). Recipients are named only when visible (To, CC): an outcome that concerns BCC
 * recipients alone is still sent, naming nobody.
 */
export function webhookEventsOf(event: RecordedEmailEvent, email: EmailState, occurredAt: string): WebhookEvent[] {
  const message = email.message;
  if (!message) return [];
  const make = (type: WebhookEventType, key: string, recipients: string[], extra: Partial<WebhookEvent['data']>): WebhookEvent => ({
    id: `evt_${event.id.replace(/-/g, '')}_${key}`,
    type,
    created_at: occurredAt,
    data: {
      email_id: message.emailId,
      project_id: message.projectId,
      test_mode: message.testMode,
      status: email.status ?? 'queued',
      recipients,
      provider_message_id: email.providerMessageId,
      ...extra,
    },
  });
  if (event.type === 'EmailSuppressed') {
    return [make('email.suppressed', 'suppressed', [...event.data.toAddresses, ...event.data.ccAddresses], { reason: shownSuppression(event.data).reason })];
  }
  return outcomesOf(event).groups.map((group) => make(group.type, group.status, [...new Set(group.shown.map((o) => o.address!))], {
    ...group.detail,
    ...(group.reason ? { reason: group.reason } : {}),
  }));
}
