// Webhook delivery rules (spec: Delivery rules): 2xx acknowledges; anything else, a 3xx
// included (rule 3: redirects are not followed, so a redirect is a failed attempt), is retried
// after 1 min, 5 min, 15 min, 1 h, 6 h and 24 h, seven attempts in all, with the same id and
// body; an unsafe destination stops at once. Pure: the dispatcher applies these decisions.

/** The times of webhook delivery: chosen at composition (apps/runtime.ts), where tests scale the retries. */
export interface WebhookPolicy {
  /** Delays before each retry; one attempt more than there are delays. */
  retryDelaysMs: readonly number[];
  /** How long a taken attempt may run before another dispatcher may take it again. */
  attemptLeaseMs: number;
}

export const WEBHOOK_POLICY: WebhookPolicy = {
  retryDelaysMs: [60_000, 5 * 60_000, 15 * 60_000, 3_600_000, 6 * 3_600_000, 24 * 3_600_000],
  // Longer than the 15 s a request may take.
  attemptLeaseMs: 20_000,
};

/** The retry delays times `factor` (RELAY_WEBHOOK_RETRY_SCALE, for tests); the lease stays. */
export const scaleWebhookPolicy = (policy: WebhookPolicy, factor: number): WebhookPolicy => ({
  ...policy,
  retryDelaysMs: policy.retryDelaysMs.map((ms) => ms * factor),
});

/** Errors after which retrying must not happen: an unsafe destination (rule 3). */
const FINAL_ERRORS = new Set(['unsafe_destination']);

export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface AttemptOutcome {
  httpStatus: number | null;
  errorCode: string | null;
}

/** After attempt `attempt` (1-based) came to `outcome`: the delivery's status and when the next attempt is due. */
export function afterAttempt(attempt: number, outcome: AttemptOutcome, at: Date, policy: WebhookPolicy): { status: WebhookDeliveryStatus; nextAttemptAt: string | null } {
  if (outcome.errorCode === null && outcome.httpStatus !== null && outcome.httpStatus >= 200 && outcome.httpStatus < 300) {
    return { status: 'succeeded', nextAttemptAt: null };
  }
  if ((outcome.errorCode !== null && FINAL_ERRORS.has(outcome.errorCode)) || attempt > policy.retryDelaysMs.length) {
    return { status: 'failed', nextAttemptAt: null };
  }
  return { status: 'pending', nextAttemptAt: new Date(at.getTime() + policy.retryDelaysMs[attempt - 1]).toISOString() };
}
