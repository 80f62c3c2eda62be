// Webhook delivery rules (spec: Delivery rules): 2xx acknowledges; anything else, a 3xx
// included (rule 3: redirects are not followed, so a redirect is a failed attempt), is retried
// after 1 min, 5 min, 15 min, 1 h, 6 h and 24 h, seven attempts in all, with the same id and
// body; an unsafe destination stops at once. Pure: the dispatcher applies these decisions.

export const WEBHOOK_RETRY_DELAYS_MS = [60_000, 5 * 60_000, 15 * 60_000, 3_600_000, 6 * 3_600_000, 24 * 3_600_000];
export const WEBHOOK_MAX_ATTEMPTS = WEBHOOK_RETRY_DELAYS_MS.length + 1;

/** Errors after which retrying must not happen: an unsafe destination (rule 3). */
const FINAL_ERRORS = new Set(['unsafe_destination']);

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface AttemptOutcome {
  httpStatus: number | null;
  errorCode: string | null;
}

/** After attempt `attempt` (1-based) came to `outcome`: the delivery's status and when the next attempt is due. */
export function afterAttempt(attempt: number, outcome: AttemptOutcome, at: Date, scale: number): { status: WebhookDeliveryStatus; nextAttemptAt: string | null } {
  if (outcome.errorCode === null && outcome.httpStatus !== null && outcome.httpStatus >= 200 && outcome.httpStatus < 300) {
    return { status: 'succeeded', nextAttemptAt: null };
  }
  if ((outcome.errorCode !== null && FINAL_ERRORS.has(outcome.errorCode)) || attempt >= WEBHOOK_MAX_ATTEMPTS) {
    return { status: 'failed', nextAttemptAt: null };
  }
  return { status: 'pending', nextAttemptAt: new Date(at.getTime() + WEBHOOK_RETRY_DELAYS_MS[attempt - 1] * scale).toISOString() };
}
