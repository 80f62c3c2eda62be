// When a sender's rates call for attention. Bounce rate (hard bounces / sent): large sending
// services review an account from 5 % and put it at risk from 10 %. Complaint rate (complaints /
// delivered): large mailbox providers ask bulk senders to stay under 0.1 % and never reach 0.3 %.
export const RATE_THRESHOLDS = {
  bounce_rate: { warning: 0.05, risk: 0.1 },
  complaint_rate: { warning: 0.001, risk: 0.003 },
} as const;

export type RateName = keyof typeof RATE_THRESHOLDS;
export type RateLevel = 'ok' | 'warning' | 'risk';

/** Where a rate stands against its thresholds; null without a rate (nothing sent or delivered). */
export function rateLevel(name: RateName, rate: number | null): RateLevel | null {
  if (rate === null) return null;
  const { warning, risk } = RATE_THRESHOLDS[name];
  return rate >= risk ? 'risk' : rate >= warning ? 'warning' : 'ok';
}
