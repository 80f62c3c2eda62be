// The email status enumeration of the spec, and which status each lifecycle step leads to.

export const STATUSES = [
  'queued', 'processing', 'sent', 'failed', 'rejected', 'suppressed', 'simulated',
  'delayed', 'delivered', 'hard_bounced', 'soft_bounced', 'complained',
] as const;

export type Status = (typeof STATUSES)[number];

export const isStatus = (value: unknown): value is Status => typeof value === 'string' && (STATUSES as readonly string[]).includes(value);
