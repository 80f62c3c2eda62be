// The email status enumeration of the spec, and the order in which statuses supersede each
// other. An email's status is the highest status among its To and CC recipients. The sender's
// own outcomes are appended in attempt order and simply replace a recipient's status (a
// retry that succeeds ends a delay); reports that reach Relay from outside, in whatever order
// the network delivers them (a DSN "delivered" before the relay's "sent"), only ever move a
// recipient up this order, or past the sender's `failed` (domain/email/outcomes.ts, statusAfter).
// Either way the same stream gives the same statuses on every replay.

export const STATUSES = [
  'queued', 'processing', 'sent', 'failed', 'rejected', 'suppressed', 'simulated',
  'delayed', 'delivered', 'hard_bounced', 'soft_bounced', 'complained',
] as const;

export type Status = (typeof STATUSES)[number];

/**
 * Higher supersedes lower. In flight (queued → processing → sent → delayed) below the
 * outcomes; a delivery below any failure that can follow it for the same recipient (a late
 * bounce, a complaint); final refusals above temporary ones; a complaint above everything,
 * because it is the last thing a recipient can do and it blocks them.
 */
export const STATUS_RANK: Record<Status, number> = {
  queued: 0,
  simulated: 0,
  processing: 1,
  sent: 2,
  delayed: 3,
  delivered: 4,
  soft_bounced: 5,
  failed: 5,
  rejected: 6,
  hard_bounced: 6,
  suppressed: 7,
  complained: 8,
};

/** The status that stands when `next` arrives for something at `current`. */
export const supersede = (current: Status, next: Status): Status => (STATUS_RANK[next] > STATUS_RANK[current] ? next : current);

/** An email's status from its visible (To, CC) recipients' statuses. */
export const emailStatusOf = (recipients: Status[], fallback: Status): Status => recipients.reduce(supersede, fallback);

/** Statuses after which nothing more will be sent to that recipient. */
export const isFinalDeliveryStatus = (status: Status): boolean =>
  ['sent', 'delivered', 'failed', 'rejected', 'hard_bounced', 'soft_bounced', 'complained', 'suppressed'].includes(status);
