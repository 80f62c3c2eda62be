// The delivery decider: who may send an email's next attempt, what a transport's answer means
// for each recipient, when the next attempt is due, and when an attempt's fate is unknown.
// The sender processor (apps/processors/sender.ts) only carries these decisions out.
//
// An attempt has two gates, both appended with the stream revision read, so of two senders
// only one passes each: the claim (DeliveryClaimed: this instance will send attempt n), and,
// right before each SMTP transaction, its start (DeliveryTransactionStarted: these recipients'
// message may now go out). A claim none of whose transactions began never reached the wire:
// when its start grace ends, another sender takes it over (a new claim of the same attempt),
// and the old holder, if it still runs, finds its transaction start refused and sends nothing.
// Only recipients whose transaction began can end as delivery_unknown, once the claim grace
// after that start ends without an outcome, and only those whose transport cannot say what
// became of them: a transport that knows (the outbox, its own provider) settles the claim, and
// its answer is recorded as the attempt's outcome (decideRecovery), only when it is the very
// transport the claim sent with (its name and instance: the outbox directory written to).
import type { DeliveryAttempted, DeliveryClaimed, DeliveryFailed, DeliveryTransactionStarted, EmailEvent, RecipientAttempt } from './events.ts';
import { pendingRecipients, reportedUnderClaim, type EmailState, type OpenClaim } from './state.ts';
import { nextHopOf, refusalStatus } from './refusals.ts';
import type { Status } from './status.ts';

/** The times of delivery: chosen at composition (apps/runtime.ts), where tests scale them. */
export interface DeliveryPolicy {
  /** Delays before each retry after a temporary failure; the last repeats. */
  retryDelaysMs: readonly number[];
  /** Retries happen until this long after the first attempt. */
  retryWindowMs: number;
  /**
   * How long a claim may wait for its first transaction to begin before another sender takes
   * it over. Taking over a live sender's claim is safe (its transaction start is refused), only
   * wasted work, so this bounds how long a dead sender's unsent claims wait.
   */
  claimStartGraceMs: number;
  /** How long after its last transaction began a claim may stay open before those recipients are declared delivery_unknown. */
  claimGraceMs: number;
}

/**
 * Retries after a temporary failure: the first within a minute, then spreading out, until 24
 * hours after the first attempt. A claim may wait two minutes for a connection: a sender claims
 * only what its transport can take on soon (apps/processors/sender.ts), so a live sender's claim
 * begins within seconds unless the server stalls. A begun transaction may stay open twenty
 * minutes: longer than any can take, so only a dead sender's expires. The longest is an mx one:
 * 5 minutes for the envelope, the body at the slowest rate a server may read it (10 MiB at
 * 32 KiB/s: 5.3 minutes), 5 minutes for the reply to the dot (infra/mail/pooled-sessions.ts).
 */
export const DELIVERY_POLICY: DeliveryPolicy = {
  retryDelaysMs: [30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000, 2 * 3_600_000, 4 * 3_600_000],
  retryWindowMs: 24 * 3_600_000,
  claimStartGraceMs: 2 * 60_000,
  claimGraceMs: 20 * 60_000,
};

/** Every figure of `policy` times `factor` (RELAY_DELIVERY_RETRY_SCALE, for tests). */
export const scaleDeliveryPolicy = (policy: DeliveryPolicy, factor: number): DeliveryPolicy => ({
  retryDelaysMs: policy.retryDelaysMs.map((ms) => ms * factor),
  retryWindowMs: policy.retryWindowMs * factor,
  claimStartGraceMs: policy.claimStartGraceMs * factor,
  claimGraceMs: policy.claimGraceMs * factor,
});

/** What a transport said for one recipient (infra/ports/mail-transport.ts). */
export type TransportResult = 'accepted' | 'delivered' | 'rejected' | 'deferred' | 'unknown';

export interface RecipientResultReport {
  index: number;
  result: TransportResult;
  smtpCode: number | null;
  enhancedCode: string | null;
  /**
   * The server's reply or the local error, recorded as given (DeliveryAttempted's
   * `recipients[i].response`). For a BCC recipient, with every address in it masked already
   * ("<address>": apps/services/delivery/attempt.ts): replies quote the recipient's address, and
   * a BCC recipient's is in no event.
   */
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
  /** Which transport of that name (MailTransport.instance: an outbox's directory), when it has one. */
  transportInstance?: string;
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

/** The claim's holder is about to begin the transaction for these recipients (one address: its indexes). */
export interface StartTransaction {
  type: 'StartTransaction';
  attempt: number;
  claimedBy: string;
  recipients: number[];
  at: string;
}

/**
 * What the claim's own transport says became of one recipient whose transaction began
 * (MailTransport.settle): `accepted`, as a send would have answered; `not_sent`, nothing of it
 * went out, so it may be sent again.
 */
export interface SettledTransaction {
  index: number;
  result: 'accepted' | 'not_sent';
  /** As a send's response (a BCC recipient's with its addresses masked: RecipientResultReport). */
  response: string;
  /** The provider's id of the accepted message, as a send would have reported it. */
  providerMessageId?: string | null;
}

/** A transport's answer about a claim left open: what it knows, by recipient index. */
export interface Settlement {
  /** The transport that answered: the one the claim sent with. */
  transport: string;
  /** Which one of that name answered (the outbox directory): the claim's transportInstance. */
  transportInstance: string;
  /** The Message-ID of the message the claim sent (the same on every attempt). */
  messageId: string;
  /** The recipients it can tell about; a begun one missing here is delivery_unknown. */
  recipients: SettledTransaction[];
}

export interface FailDelivery {
  type: 'FailDelivery';
  attempt: number;
  /** The instance that holds the claim; null when recovering a claim someone left open. */
  claimedBy: string | null;
  failureCode: string;
  reason: string;
  at: string;
  /**
   * Recovery only (claimedBy null): what the claim's transport knows became of the transactions
   * that began (decideRecovery). Absent: it cannot tell (smtp, mx), and they fail with
   * `failureCode`. Only the transport the claim sent with may answer: an answer of another
   * (another name, another instance, or a claim that names no instance) counts as none.
   */
  settled?: Settlement;
}

export type DeliveryCommand = ClaimDelivery | StartTransaction | RecordAttempt | FailDelivery;

/** When attempt `attempt + 1` is due after `attempt` failed temporarily; null once past the window. */
export function nextAttemptAt(attempt: number, firstAttemptAt: string, at: string, policy: DeliveryPolicy): string | null {
  const delays = policy.retryDelaysMs;
  const due = Date.parse(at) + delays[Math.min(attempt - 1, delays.length - 1)];
  return due <= Date.parse(firstAttemptAt) + policy.retryWindowMs ? new Date(due).toISOString() : null;
}

/**
 * Why one recipient failed or was rejected, from its own result: its transaction's fate is
 * unknown (delivery_unknown), a temporary failure outlasted the retry window
 * (provider_unavailable), or the provider refused it (provider_rejected). Null otherwise.
 */
export function failureCodeOf(report: Pick<RecipientResultReport, 'result'>, status: Status): string | null {
  if (status === 'rejected') return 'provider_rejected';
  if (status !== 'failed') return null;
  return report.result === 'unknown' ? 'delivery_unknown' : 'provider_unavailable';
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

/**
 * Marks an outcome of recipient `index` that a report recorded under this claim had followed: a
 * delay the provider reported about this attempt's copy, written once it had taken the copy, so
 * after the answer recorded now. The folds then keep what the report makes of it (statusAfter).
 */
const reportedFirst = (state: EmailState, index: number): { reportedFirst?: true } => (reportedUnderClaim(state.delivery, index) ? { reportedFirst: true } : {});

export function decideClaim(command: ClaimDelivery, state: EmailState, policy: DeliveryPolicy): DeliveryClaimed[] {
  const d = state.delivery;
  if (state.admission?.status !== 'queued' || d.finished) return [];
  const claimed: DeliveryClaimed = {
    type: 'DeliveryClaimed',
    data: {
      attempt: command.attempt, claimedBy: command.claimedBy, transport: command.transport,
      ...(command.transportInstance ? { transportInstance: command.transportInstance } : {}), occurredAt: command.at,
    },
  };
  const open = d.openClaim;
  if (open) {
    // Taken over: only the open attempt, only before any of its transactions began, only once
    // its start grace is over.
    if (command.attempt !== open.attempt || open.begun.length > 0) return [];
    return Date.parse(open.claimedAt) + policy.claimStartGraceMs <= Date.parse(command.at) ? [claimed] : [];
  }
  // A stale or early request (another instance got further, or the retry is not due): nothing.
  if (command.attempt !== d.attempts + 1) return [];
  if (d.nextAttemptAt !== null && d.nextAttemptAt > command.at) return [];
  return [claimed];
}

/**
 * Only the claim's holder, only recipients still pending, each once per claim: a refusal means
 * the claim is no longer this instance's (taken over), and nothing may be sent.
 */
export function decideTransactionStart(command: StartTransaction, state: EmailState): DeliveryTransactionStarted[] {
  const claim = state.delivery.openClaim;
  if (!claim || claim.attempt !== command.attempt || claim.claimedBy !== command.claimedBy || command.recipients.length === 0) return [];
  const pending = new Set(pendingRecipients(state.delivery));
  if (command.recipients.some((index) => !pending.has(index) || claim.begun.includes(index))) return [];
  return [{ type: 'DeliveryTransactionStarted', data: { attempt: command.attempt, recipients: [...command.recipients], occurredAt: command.at } }];
}

export function decideAttemptOutcome(command: RecordAttempt, state: EmailState, policy: DeliveryPolicy): DeliveryAttempted[] {
  const claim = state.delivery.openClaim;
  if (!claim || claim.attempt !== command.attempt || claim.claimedBy !== command.claimedBy) return [];
  const reported = new Map(command.results.map((r) => [r.index, r]));
  // A recipient the transport said nothing about was not tried: a temporary failure.
  const results = pendingRecipients(state.delivery).map((index) => reported.get(index) ?? { index, result: 'deferred' as const, smtpCode: null, enhancedCode: null, response: 'not attempted' });
  return [attemptOutcome(command, results, state, policy)];
}

/** The outcome of the open claim's attempt from a result for every pending recipient. */
function attemptOutcome(
  command: Pick<RecordAttempt, 'attempt' | 'transport' | 'messageId' | 'providerMessageId' | 'at'>, results: RecipientResultReport[], state: EmailState, policy: DeliveryPolicy,
): DeliveryAttempted {
  const retryAt = results.some((r) => r.result === 'deferred')
    ? nextAttemptAt(command.attempt, state.delivery.firstAttemptAt ?? command.at, command.at, policy)
    : null;
  const recipients: RecipientAttempt[] = results.map((r) => {
    const status = statusOf(r, command.transport, retryAt !== null);
    const failureCode = failureCodeOf(r, status);
    return {
      index: r.index,
      address: addressOf(state, r.index),
      status,
      smtpCode: r.smtpCode,
      enhancedCode: r.enhancedCode,
      response: r.response,
      ...(r.providerMessageId ? { providerMessageId: r.providerMessageId } : {}),
      ...(failureCode ? { failureCode } : {}),
      ...reportedFirst(state, r.index),
    };
  });
  // The event-wide code, kept for readers of events from before each recipient had its own:
  // the gravest of the recipients' (BCC included). Readers take each recipient's own.
  const codes = new Set(recipients.map((r) => r.failureCode));
  const failureCode = (['delivery_unknown', 'provider_unavailable', 'provider_rejected'] as const).find((code) => codes.has(code)) ?? null;
  return {
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
  };
}

/** Whether a recovery (claimedBy null) of the open claim may be decided at `at`: its transactions began, and the grace after the last start is over. */
function recoverable(command: FailDelivery, state: EmailState, policy: DeliveryPolicy): boolean {
  const deadline = claimDeadline(state, policy);
  return deadline?.kind === 'unknown' && deadline.at <= command.at;
}

export function decideFailure(command: FailDelivery, state: EmailState, policy: DeliveryPolicy): DeliveryFailed[] {
  const claim = state.delivery.openClaim;
  if (!claim || claim.attempt !== command.attempt) return [];
  let failing = pendingRecipients(state.delivery);
  if (command.claimedBy === null) {
    // Recovery: only recipients whose transaction began, once nobody finished it within the
    // grace period; a claim that never began is taken over instead (decideClaim).
    if (!recoverable(command, state, policy)) return [];
    failing = failing.filter((index) => claim.begun.includes(index));
  } else if (claim.claimedBy !== command.claimedBy) {
    return [];
  }
  return [{
    type: 'DeliveryFailed',
    data: {
      attempt: command.attempt,
      failureCode: command.failureCode,
      reason: command.reason,
      recipients: failing.map((index) => ({ index, address: addressOf(state, index), ...reportedFirst(state, index) })),
      occurredAt: command.at,
    },
  }];
}

/**
 * Whether `settled` comes from the transport the open claim sent with: the same name and the
 * same instance (the outbox directory it wrote to). A claim that names no instance (smtp, mx,
 * one recorded before claims named theirs) has no transport that may answer for it: which
 * outbox it wrote to is unknown, and another outbox's "not there" would have them sent twice.
 */
export function answersForClaim(settled: Pick<Settlement, 'transport' | 'transportInstance'>, claim: Pick<OpenClaim, 'transport' | 'transportInstance'>): boolean {
  // A claim that names none (null) is never matched: an answer always names its instance.
  return settled.transport === claim.transport && settled.transportInstance === claim.transportInstance;
}

/**
 * Recovery of a claim left open past its grace (FailDelivery, claimedBy null). When the
 * claim's own transport settled it (answersForClaim), its answer is the attempt's outcome,
 * recorded as the holder would have recorded the transport's answer (decideAttemptOutcome): an
 * accepted recipient is `sent`; one not sent is a temporary failure (`delayed`, retried on the
 * schedule, like a recipient whose transaction had not begun: `not attempted`); a begun one the
 * answer leaves out is `unknown`: failed, delivery_unknown, never sent again. Without an answer,
 * or with another transport's, every begun recipient fails with the command's code
 * (decideFailure) and the others are sent at once by the next attempt.
 */
export function decideRecovery(command: FailDelivery, state: EmailState, policy: DeliveryPolicy): Array<DeliveryAttempted | DeliveryFailed> {
  const { settled } = command;
  const claim = state.delivery.openClaim;
  if (command.claimedBy !== null || !settled || (claim && !answersForClaim(settled, claim))) return decideFailure(command, state, policy);
  if (!claim || claim.attempt !== command.attempt || !recoverable(command, state, policy)) return [];
  const results = settledResults(settled, command.reason, state);
  // As the sender does: the email's provider id is its first visible recipient's.
  const providerMessageId = results.find((r) => r.index < state.visibleAddresses.length && r.providerMessageId)?.providerMessageId ?? null;
  return [attemptOutcome({ attempt: command.attempt, transport: settled.transport, messageId: settled.messageId, providerMessageId, at: command.at }, results, state, policy)];
}

/**
 * The result of every pending recipient of the open claim, as its transport settled it (see
 * decideRecovery); `reason`: the response of a begun recipient it could not tell about.
 */
export function settledResults(settled: Settlement, reason: string, state: EmailState): RecipientResultReport[] {
  const begun = state.delivery.openClaim?.begun ?? [];
  const known = new Map(settled.recipients.map((r) => [r.index, r]));
  return pendingRecipients(state.delivery).map((index): RecipientResultReport => {
    const none = { index, smtpCode: null, enhancedCode: null };
    if (!begun.includes(index)) return { ...none, result: 'deferred', response: 'not attempted: the sender stopped before this transaction began', stage: 'not_begun' };
    const answer = known.get(index);
    if (!answer) return { ...none, result: 'unknown', response: reason };
    return answer.result === 'accepted'
      ? { ...none, result: 'accepted', response: answer.response, ...(answer.providerMessageId ? { providerMessageId: answer.providerMessageId } : {}) }
      : { ...none, result: 'deferred', response: answer.response };
  });
}

export function decideDelivery(command: DeliveryCommand, state: EmailState, policy: DeliveryPolicy): EmailEvent[] {
  switch (command.type) {
    case 'ClaimDelivery': return decideClaim(command, state, policy);
    case 'StartTransaction': return decideTransactionStart(command, state);
    case 'RecordAttempt': return decideAttemptOutcome(command, state, policy);
    case 'FailDelivery': return decideRecovery(command, state, policy);
  }
}

/**
 * What becomes of the open claim of `state` if its holder records nothing, and from when:
 * `takeover` (no transaction began: another sender may claim the attempt) or `unknown` (it is
 * recovered: the recipients whose transaction began become delivery_unknown, unless the
 * transport settles them: decideRecovery). Null without an open claim.
 */
export function claimDeadline(state: EmailState, policy: DeliveryPolicy): { kind: 'takeover' | 'unknown'; at: string } | null {
  const claim = state.delivery.openClaim;
  if (!claim) return null;
  if (claim.begunAt === null) return { kind: 'takeover', at: new Date(Date.parse(claim.claimedAt) + policy.claimStartGraceMs).toISOString() };
  return { kind: 'unknown', at: new Date(Date.parse(claim.begunAt) + policy.claimGraceMs).toISOString() };
}
