// What a sender's rates are and when they call for attention. Each rate counts the recipients
// that reached one outcome against the recipients of its base: those that reached any of the
// base's outcomes, each once, so a rate is never above 1.
// - Bounce rate: hard bounces among the recipients that had an attempt outcome: accepted by the
//   next hop (`sent`) or refused for good (`hard_bounced`, at RCPT TO as well as by a later
//   notice). Large sending services review an account from 5 % and put it at risk from 10 %.
// - Complaint rate: complaints among the recipients sent: accepted by the receiving server
//   (`sent`; what sending services and mailbox providers call delivered), or proven arrived by a
//   delivery notice or by the complaint itself (a smarthost or the outbox gives no notices).
//   Large mailbox providers ask bulk senders to stay under 0.1 % and never reach 0.3 %.
export const RATE_THRESHOLDS = {
  bounce_rate: { warning: 0.05, risk: 0.1 },
  complaint_rate: { warning: 0.001, risk: 0.003 },
} as const;

export type RateName = keyof typeof RATE_THRESHOLDS;
export type RateLevel = 'ok' | 'warning' | 'risk';

/** Per rate: the outcome it counts, and the outcomes that put a recipient in its base (the counted one among them). */
export const RATE_DEFINITIONS = {
  bounce_rate: { counts: 'hard_bounced', base: ['sent', 'hard_bounced'] },
  complaint_rate: { counts: 'complained', base: ['sent', 'delivered', 'complained'] },
} as const satisfies Record<RateName, { counts: string; base: readonly string[] }>;

export const RATE_NAMES = Object.keys(RATE_THRESHOLDS) as RateName[];

/** Where a rate stands against its thresholds; null without a rate (an empty base). */
export function rateLevel(name: RateName, rate: number | null): RateLevel | null {
  if (rate === null) return null;
  const { warning, risk } = RATE_THRESHOLDS[name];
  return rate >= risk ? 'risk' : rate >= warning ? 'warning' : 'ok';
}
