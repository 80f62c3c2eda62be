// Webhook events (spec: Events): which email events become which webhook events, with the
// spec's payload. One email event may give several webhook events (recipients of one attempt
// with different outcomes); each has an id derived from the email event's id, so it is the
// same across retries, replays, rebalances and rebuilds, and the same for every endpoint.
import type { RecordedEmailEvent } from '../email/events.ts';
import type { EmailState } from '../email/state.ts';
import type { Status } from '../email/status.ts';

export const WEBHOOK_EVENT_TYPES = [
  'email.sent', 'email.delivered', 'email.bounced', 'email.complained',
  'email.rejected', 'email.failed', 'email.delayed', 'email.suppressed',
] as const;

export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

export const isWebhookEventType = (value: unknown): value is WebhookEventType =>
  typeof value === 'string' && (WEBHOOK_EVENT_TYPES as readonly string[]).includes(value);

export interface WebhookEvent {
  id: string;
  type: WebhookEventType;
  created_at: string;
  data: {
    email_id: string;
    project_id: string;
    test_mode: boolean;
    status: Status;
    recipients: string[];
    provider_message_id: string | null;
    bounce_type?: string;
    complaint_type?: string;
    delay_type?: string;
    reason?: string;
  };
}

/** The event name of each recipient outcome: the webhook's type and the timeline entry's alike. */
export const OUTCOME_EVENT: Partial<Record<Status, WebhookEventType>> = {
  sent: 'email.sent',
  delivered: 'email.delivered',
  rejected: 'email.rejected',
  hard_bounced: 'email.bounced',
  soft_bounced: 'email.bounced',
  delayed: 'email.delayed',
  failed: 'email.failed',
  complained: 'email.complained',
};

interface Outcome {
  address: string | null;
  status: Status;
  reason?: string;
}

function detailsOf(status: Status, extra: { delayType?: string; complaintType?: string | null }): Partial<WebhookEvent['data']> {
  if (status === 'hard_bounced') return { bounce_type: 'hard' };
  if (status === 'soft_bounced') return { bounce_type: 'soft' };
  if (status === 'delayed') return { delay_type: extra.delayType ?? 'retry' };
  if (status === 'complained') return { complaint_type: extra.complaintType ?? 'abuse' };
  return {};
}

/**
 * The webhook events an email event gives, from the email's state right after it (its status is
 * the payload's). Recipients are named only when visible (To, CC): an outcome that concerns BCC
 * recipients alone is still sent, naming nobody.
 */
export function webhookEventsOf(event: RecordedEmailEvent, email: EmailState, occurredAt: string): WebhookEvent[] {
  if (!email.message) return [];
  const message = email.message;
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
  const grouped = (outcomes: Outcome[], extra: { delayType?: string; complaintType?: string | null; failureCode?: string | null }) => {
    const byType = new Map<string, { type: WebhookEventType; status: Status; recipients: string[]; reasons: string[] }>();
    for (const o of outcomes) {
      const type = OUTCOME_EVENT[o.status];
      if (!type) continue;
      const key = `${type}:${o.status}`;
      const group = byType.get(key) ?? { type, status: o.status, recipients: [], reasons: [] };
      if (o.address !== null && !group.recipients.includes(o.address)) group.recipients.push(o.address);
      if (o.reason && o.address !== null && !group.reasons.includes(o.reason)) group.reasons.push(o.reason);
      byType.set(key, group);
    }
    return [...byType.values()].map((g) => {
      const failure = g.status === 'failed' || g.status === 'rejected' ? extra.failureCode ?? null : null;
      const reason = [failure, ...g.reasons].filter(Boolean).join('; ').slice(0, 1000);
      return make(g.type, g.status, g.recipients, { ...detailsOf(g.status, extra), ...(reason ? { reason } : {}) });
    });
  };
  switch (event.type) {
    case 'EmailSuppressed': {
      const visible = new Set([...event.data.toAddresses, ...event.data.ccAddresses]);
      const named = event.data.suppressedRecipients.filter((r) => visible.has(r.address));
      return [make('email.suppressed', 'suppressed', [...event.data.toAddresses, ...event.data.ccAddresses], {
        reason: named.length > 0 ? event.data.reason : 'a recipient is suppressed',
      })];
    }
    case 'DeliveryAttempted':
      return grouped(event.data.recipients.map((r) => ({ address: r.address, status: r.status, reason: r.response })), { failureCode: event.data.failureCode });
    case 'DeliveryFailed':
      return grouped(event.data.recipients.map((r) => ({ address: r.address, status: 'failed' as const, reason: event.data.reason })), { failureCode: event.data.failureCode });
    case 'RecipientReported': {
      if (event.data.outcome === 'undetermined') return [];
      const reason = [event.data.status, event.data.reason].filter(Boolean).join(' ');
      return grouped([{ address: event.data.address, status: event.data.outcome, reason }], { delayType: 'reported', complaintType: event.data.complaintType });
    }
    default:
      return [];
  }
}
