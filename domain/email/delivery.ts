// The delivery decider: who may send an email's next attempt, what a transport's answer means
// for each recipient, when the next attempt is due, and when an attempt's fate is unknown.
// The sender processor (apps/processors/sender.ts) only carries these decisions out.
import type { DeliveryAttempted, DeliveryClaimed, DeliveryFailed, EmailEvent, RecipientAttempt } from './events.ts';
import { pendingRecipients, type EmailState } from './state.ts';
import { nextHopOf, refusalStatus } from './refusals.ts';
import type { Status } from './status.ts';

/** The times of delivery: chosen at composition (apps/runtime.ts), where tests scale them. */
export interface DeliveryPolicy {
  /** Delays before each retry after a temporary failure; the last repeats. */
  retryDelaysMs: readonly number[];
  /** Retries happen until this long after the first attempt. */
  retryWindowMs: number;
  /** How long a claim may stay open before its attempt is declared delivery_unknown. */
  claimGraceMs: number;
}

/**
 * Retries after a temporary failure: the first within a minute, then spreading out, until 24
 * hours after the first attempt. A claim may stay open ten minutes: longer than any attempt can
 * take (transport timeouts are minutes), so only a dead sender's claim expires.
 */
export const DELIVERY_POLICY: DeliveryPolicy = {
  retryDelaysMs: [30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000, 2 * 3_600_000, 4 * 3_600_000],
  retryWindowMs: 24 * 3_600_000,
  claimGraceMs: 10 * 60_000,
};

/** Every figure of `policy` times `factor` (RELAY_DELIVERY_RETRY_SCALE, for tests). */
export const scaleDeliveryPolicy = (policy: DeliveryPolicy, factor: number): DeliveryPolicy => ({
  retryDelaysMs: policy.retryDelaysMs.map((ms) => ms * factor),
  retryWindowMs: policy.retryWindowMs * factor,
  claimGraceMs: policy.claimGraceMs * factor,
});

/** What a transport said for one recipient (infra/ports/mail-transport.ts). */
export type TransportResult = 'accepted' | 'delivered' | 'rejected' | 'deferred' | 'unknown';

export interface RecipientResultReport {
  index: number;
  result: TransportResult;
  smtpCode: number | null;
  enhancedCode: string | null;
  response: string;
  /** The stage a refusal came at (connection, mail_from, rcpt_to, data, dns…), when the transport said. */
  stage?: string;
  /** The queue id of the transaction that carried this recipient, when it was accepted. */
  providerMessageId?: string | null;
}

export interface ClaimDelivery {
  type: 'ClaimDelivery';
  attempt: number;
  claimedBy: string;
  transport: string;
  at: string;
}

export interface RecordAttempt {
  type: 'RecordAttempt';
  attempt: number;
  claimedBy: string;
  transport: string;
  messageId: string;
  providerMessageId: string | null;
  results: RecipientResultReport[];
  at: string;
}

export interface FailDelivery {
  type: 'FailDelivery';
  attempt: number;
  /** The instance that holds the claim; null when recovering a claim someone left open. */
  claimedBy: string | null;
  failureCode: string;
  reason: string;
  at: string;
}

export type DeliveryCommand = ClaimDelivery | RecordAttempt | FailDelivery;

/** When attempt `attempt + 1` is due after `attempt` failed temporarily; null once past the window. */
export function nextAttemptAt(attempt: number, firstAttemptAt: string, at: string, policy: DeliveryPolicy): string | null {
  const delays = policy.retryDelaysMs;
  const due = Date.parse(at) + delays[Math.min(attempt - 1, delays.length - 1)];
  return due <= Date.parse(firstAttemptAt) + policy.retryWindowMs ? new Date(due).toISOString() : null;
}

/**
 * A refusal's status follows one rule in every mode (domain/email/refusals.ts). A temporary
 * failure that outlasts the retry window is the recipient's soft bounce when the next hop was
 * its own server, and `failed` (provider_unavailable) when it was Relay's provider.
 */
function statusOf(report: RecipientResultReport, transport: string, retrying: boolean): Status {
  switch (report.result) {
    case 'accepted': return 'sent';
    case 'delivered': return 'delivered';
    case 'rejected': return refusalStatus(report, nextHopOf(transport));
    case 'unknown': return 'failed';
    case 'deferred': return retrying ? 'delayed' : transport === 'mx' ? 'soft_bounced' : 'failed';
  }
}

const addressOf = (state: EmailState, index: number): string | null => state.visibleAddresses[index] ?? null;

export function decideClaim(command: ClaimDelivery, state: EmailState): DeliveryClaimed[] {
  const d = state.delivery;
  if (state.admission?.status !== 'queued' || d.finished || d.openClaim) return [];
  // A stale or early request (another instance got further, or the retry is not due): nothing.
  if (command.attempt !== d.attempts + 1) return [];
  if (d.nextAttemptAt !== null && d.nextAttemptAt > command.at) return [];
  return [{ type: 'DeliveryClaimed', data: { attempt: command.attempt, claimedBy: command.claimedBy, transport: command.transport, occurredAt: command.at } }];
}

export function decideAttemptOutcome(command: RecordAttempt, state: EmailState, policy: DeliveryPolicy): DeliveryAttempted[] {
  const claim = state.delivery.openClaim;
  if (!claim || claim.attempt !== command.attempt || claim.claimedBy !== command.claimedBy) return [];
  const reported = new Map(command.results.map((r) => [r.index, r]));
  const pending = pendingRecipients(state.delivery);
  // A recipient the transport said nothing about was not tried: a temporary failure.
  const results = pending.map((index) => reported.get(index) ?? { index, result: 'deferred' as const, smtpCode: null, enhancedCode: null, response: 'not attempted' });
  const retryAt = results.some((r) => r.result === 'deferred')
    ? nextAttemptAt(command.attempt, state.delivery.firstAttemptAt ?? command.at, command.at, policy)
    : null;
  const recipients: RecipientAttempt[] = results.map((r) => ({
    index: r.index,
    address: addressOf(state, r.index),
    status: statusOf(r, command.transport, retryAt !== null),
    smtpCode: r.smtpCode,
    enhancedCode: r.enhancedCode,
    response: r.response,
    ...(r.providerMessageId ? { providerMessageId: r.providerMessageId } : {}),
  }));
  const failureCode = results.some((r) => r.result === 'unknown')
    ? 'delivery_unknown'
    : recipients.some((r) => r.status === 'failed') ? 'provider_unavailable'
      : recipients.some((r) => r.status === 'rejected') ? 'provider_rejected' : null;
  return [{
    type: 'DeliveryAttempted',
    data: {
      attempt: command.attempt,
      transport: command.transport,
      messageId: command.messageId,
      providerMessageId: command.providerMessageId,
      recipients,
      nextAttemptAt: retryAt,
      failureCode,
      occurredAt: command.at,
    },
  }];
}

export function decideFailure(command: FailDelivery, state: EmailState, policy: DeliveryPolicy): DeliveryFailed[] {
  const claim = state.delivery.openClaim;
  if (!claim || claim.attempt !== command.attempt) return [];
  if (command.claimedBy === null) {
    // Recovery: only a claim nobody finished within the grace period.
    if (Date.parse(claim.claimedAt) + policy.claimGraceMs > Date.parse(command.at)) return [];
  } else if (claim.claimedBy !== command.claimedBy) {
    return [];
  }
  return [{
    type: 'DeliveryFailed',
    data: {
      attempt: command.attempt,
      failureCode: command.failureCode,
      reason: command.reason,
      recipients: pendingRecipients(state.delivery).map((index) => ({ index, address: addressOf(state, index) })),
      occurredAt: command.at,
    },
  }];
}

export function decideDelivery(command: DeliveryCommand, state: EmailState, policy: DeliveryPolicy): EmailEvent[] {
  switch (command.type) {
    case 'ClaimDelivery': return decideClaim(command, state);
    case 'RecordAttempt': return decideAttemptOutcome(command, state, policy);
    case 'FailDelivery': return decideFailure(command, state, policy);
  }
}

/** When the open claim of `state` expires (its recovery is due); null without one. */
export const claimExpiresAt = (state: EmailState, policy: DeliveryPolicy): string | null =>
  (state.delivery.openClaim ? new Date(Date.parse(state.delivery.openClaim.claimedAt) + policy.claimGraceMs).toISOString() : null);
