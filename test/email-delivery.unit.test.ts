// Given/when/then tests of the delivery decider (domain/email/delivery.ts), with the status
// order (domain/email/status.ts) and the email state it reads (domain/email/state.ts): every
// rule has a test that fails without it. Recipients of the default message: 0 To, 1 CC, 2 BCC.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  DELIVERY_POLICY, claimDeadline, decideAttemptOutcome, decideClaim, decideDelivery, decideFailure, decideRecovery, decideTransactionStart, nextAttemptAt, scaleDeliveryPolicy,
  type ClaimDelivery, type DeliveryPolicy, type FailDelivery, type RecipientResultReport, type RecordAttempt, type SettledTransaction, type StartTransaction, type TransportResult,
} from '../domain/email/delivery.ts';
import type { DeliveryAttempted, EmailEvent, RecipientReported } from '../domain/email/events.ts';
import { copyOf, evolveEmail, foldEmail, initialEmailState, pendingRecipients, reportsAbout, type EmailState } from '../domain/email/state.ts';
import { STATUSES, STATUS_RANK, emailStatusOf, isFinalDeliveryStatus, supersede, type Status } from '../domain/email/status.ts';
import { BCC_INDEX, CC, CC_INDEX, T0, TO, TO_INDEX, accepted, after, recorded, suppressed, unknownEvent } from './support/email-events.ts';

const POLICY = DELIVERY_POLICY;
const DELIVERY_CLAIM_GRACE_MS = POLICY.claimGraceMs;
const START_GRACE_MS = POLICY.claimStartGraceMs;
const DELIVERY_RETRY_WINDOW_MS = POLICY.retryWindowMs;
const SECOND = 1_000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

const claim = (overrides: Partial<ClaimDelivery> = {}): ClaimDelivery => ({
  type: 'ClaimDelivery', attempt: 1, claimedBy: 'sender-a', transport: 'smtp', at: after(SECOND), ...overrides,
});

const result = (index: number, outcome: TransportResult): RecipientResultReport => (outcome === 'rejected'
  ? { index, result: outcome, smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 No such user here', stage: 'rcpt_to' }
  : { index, result: outcome, smtpCode: 250, enhancedCode: '2.0.0', response: `server said ${outcome}` });
/** The same result for all three recipients. */
const all = (outcome: TransportResult): RecipientResultReport[] => [TO_INDEX, CC_INDEX, BCC_INDEX].map((i) => result(i, outcome));

const record = (results: RecipientResultReport[], overrides: Partial<RecordAttempt> = {}): RecordAttempt => ({
  type: 'RecordAttempt', attempt: 1, claimedBy: 'sender-a', transport: 'smtp', messageId: '<m1@example.test>', providerMessageId: 'prov-1',
  results, at: after(2 * SECOND), ...overrides,
});

const start = (recipients: number[], overrides: Partial<StartTransaction> = {}): StartTransaction => ({
  type: 'StartTransaction', attempt: 1, claimedBy: 'sender-a', recipients, at: after(1_500), ...overrides,
});

const fail = (overrides: Partial<FailDelivery> = {}): FailDelivery => ({
  type: 'FailDelivery', attempt: 1, claimedBy: 'sender-a', failureCode: 'content_expired', reason: 'the body was destroyed',
  at: after(2 * SECOND), ...overrides,
});

/** The state after `events`, asserting that the decision produced exactly one event. */
function applied(state: EmailState, events: EmailEvent[]): EmailState {
  assert.is(events.length, 1, 'the decision should produce one event');
  return foldEmail(events, state);
}

const queued = (): EmailState => foldEmail([accepted()]);
/** `state` after the holder began the transaction of `recipients`. */
const begun = (recipients: number[], state: EmailState, overrides: Partial<StartTransaction> = {}): EmailState =>
  applied(state, decideTransactionStart(start(recipients, overrides), state));
const claimedBy = (overrides: Partial<ClaimDelivery> = {}, state = queued()): EmailState => applied(state, decideClaim(claim(overrides), state, POLICY));
/** An email whose attempt 1 was claimed at +1 s and got `results` at +2 s. */
const attemptedWith = (results: RecipientResultReport[], overrides: Partial<RecordAttempt> = {}): EmailState => {
  const state = claimedBy({ transport: overrides.transport ?? 'smtp' });
  return applied(state, decideAttemptOutcome(record(results, overrides), state, POLICY));
};
const outcomeOf = (state: EmailState, command: RecordAttempt, policy: DeliveryPolicy = POLICY): DeliveryAttempted['data'] => {
  const events = decideAttemptOutcome(command, state, policy);
  assert.is(events.length, 1, 'the attempt should be recorded');
  return events[0].data;
};
const statuses = (data: DeliveryAttempted['data']): Status[] => data.recipients.map((r) => r.status);

// ── the status order ─────────────────────────────────────────────────────────────

const order = suite('status order');

order('every status has a rank; in flight below outcomes, delivery below later failures, complaint on top', () => {
  for (const status of STATUSES) assert.type(STATUS_RANK[status], 'number', status);
  const below = (a: Status, b: Status) => assert.ok(STATUS_RANK[a] < STATUS_RANK[b], `${a} < ${b}`);
  below('queued', 'processing');
  below('processing', 'sent');
  below('sent', 'delayed');
  below('delayed', 'delivered');
  below('delivered', 'soft_bounced');
  below('delivered', 'failed');
  below('soft_bounced', 'hard_bounced');
  below('failed', 'rejected');
  below('hard_bounced', 'suppressed');
  below('suppressed', 'complained');
  assert.is(STATUS_RANK.failed, STATUS_RANK.soft_bounced);
  assert.is(STATUS_RANK.rejected, STATUS_RANK.hard_bounced);
});

order('given a status, when a lower or equal one arrives, then the current one stands; a higher one supersedes', () => {
  assert.is(supersede('delivered', 'sent'), 'delivered', 'a late "sent" after a DSN "delivered"');
  assert.is(supersede('sent', 'delivered'), 'delivered');
  assert.is(supersede('failed', 'soft_bounced'), 'failed', 'equal rank: the first stands');
  assert.is(supersede('soft_bounced', 'failed'), 'soft_bounced');
  assert.is(supersede('hard_bounced', 'complained'), 'complained');
});

order('given recipient statuses, when the email status is taken, then it is the highest of them and the fallback', () => {
  assert.is(emailStatusOf(['delivered', 'hard_bounced'], 'queued'), 'hard_bounced');
  assert.is(emailStatusOf(['hard_bounced', 'delivered'], 'queued'), 'hard_bounced', 'in any order');
  assert.is(emailStatusOf(['sent', 'sent'], 'delayed'), 'delayed', 'never below the fallback');
  assert.is(emailStatusOf([], 'queued'), 'queued');
});

order('final statuses end a recipient’s delivery; queued, processing and delayed do not', () => {
  assert.equal(STATUSES.filter((s) => !isFinalDeliveryStatus(s)), ['queued', 'processing', 'simulated', 'delayed']);
});

order.run();

// ── the email state ─────────────────────────────────────────────────────────────

const state = suite('email state');

state('given an accepted email, then every recipient (BCC included) is queued and pending, and the email is queued', () => {
  const given = queued();
  assert.equal(given.delivery.recipients, ['queued', 'queued', 'queued']);
  assert.equal(pendingRecipients(given.delivery), [0, 1, 2]);
  assert.equal(given.visibleAddresses, [TO, CC]);
  assert.is(given.status, 'queued');
  assert.is(given.revision, 0);
});

state('given a suppressed email, then delivery is finished with nobody pending', () => {
  const given = foldEmail([suppressed([{ address: TO, reason: 'manual' }])]);
  assert.is(given.delivery.finished, true);
  assert.equal(pendingRecipients(given.delivery), []);
  assert.is(given.status, 'suppressed');
});

state('given a claim, then pending recipients are processing and final ones stay as they are', () => {
  const retry = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')]);
  const given = claimedBy({ attempt: 2, at: retry.delivery.nextAttemptAt! }, retry);
  assert.equal(given.delivery.recipients, ['sent', 'processing', 'processing'], 'a retry’s claim ends the delay');
  assert.is(given.status, 'sent', 'the highest of sent and processing');
  assert.equal(pendingRecipients(given.delivery), [1, 2]);
  assert.equal(given.delivery.openClaim, { attempt: 2, claimedBy: 'sender-a', claimedAt: retry.delivery.nextAttemptAt!, transport: 'smtp', transportInstance: null, begun: [], begunAt: null });
  assert.is(given.delivery.firstAttemptAt, after(SECOND), 'the first attempt’s time stays');
});

state('given an accepted email, then the state holds its admitted message (bodies and BCC sealed) and when each step happened', () => {
  const given = queued();
  assert.equal(given.message, accepted().data);
  assert.is(given.occurredAt, T0);
  const claimed = claimedBy({ at: after(5 * SECOND) }, given);
  assert.is(claimed.occurredAt, after(5 * SECOND), 'the last event’s time');
  assert.is(claimed.delivery.lastAttemptAt, null, 'no outcome yet');
  const done = applied(claimed, decideAttemptOutcome(record(all('accepted'), { at: after(7 * SECOND) }), claimed, POLICY));
  assert.is(done.delivery.lastAttemptAt, after(7 * SECOND));
  assert.is(done.occurredAt, after(7 * SECOND));
  assert.is(done.message, given.message, 'later events leave the message as admitted');
});

state('given a suppressed email, then its message is kept too (nothing to deliver)', () => {
  const given = foldEmail([suppressed([{ address: TO, reason: 'manual' }])]);
  assert.is(given.message?.emailId, 'em_test1');
  assert.is(given.message?.projectId, 'prj_1');
});

state('given attempts, then the provider message id is the latest one reported; an attempt that reported none keeps it', () => {
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')], { providerMessageId: 'prov-1' });
  assert.is(first.providerMessageId, 'prov-1');
  const second = claimedBy({ attempt: 2, at: first.delivery.nextAttemptAt! }, first);
  const silent = applied(second, decideAttemptOutcome(record(all('accepted'), { attempt: 2, providerMessageId: null, at: first.delivery.nextAttemptAt! }), second, POLICY));
  assert.is(silent.providerMessageId, 'prov-1');
  const third = applied(second, decideAttemptOutcome(record(all('accepted'), { attempt: 2, providerMessageId: 'prov-2', at: first.delivery.nextAttemptAt! }), second, POLICY));
  assert.is(third.providerMessageId, 'prov-2');
});

// Pins: a report never puts a recipient back into the send set. A transport that accepted a
// recipient (sent) ends Relay's sending to it; a DSN "delayed" afterwards shows (delayed is
// above sent) but the next attempt, due for a deferred co-recipient, neither claims nor sends it.
const reportedDelay = (index: number, at: string): RecipientReported => ({
  type: 'RecipientReported',
  data: {
    reportId: `rep-delay-${index}`, recipientIndex: index, address: index === TO_INDEX ? TO : index === CC_INDEX ? CC : null, outcome: 'delayed',
    format: 'dsn', status: '4.4.1', diagnosticCode: null, reason: 'delayed downstream', complaintType: null, occurredAt: at,
  },
});

state('given a sent recipient reported delayed afterwards, when the next attempt (for a deferred co-recipient) comes, then it is not sent again', () => {
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'accepted')]);
  const given = foldEmail([reportedDelay(TO_INDEX, after(3 * SECOND))], first);
  assert.equal(given.delivery.recipients, ['delayed', 'delayed', 'sent'], 'the report shows');
  assert.equal(given.delivery.done, [true, false, true]);
  assert.equal(pendingRecipients(given.delivery), [CC_INDEX], 'only the deferred recipient is pending');
  const claimed = claimedBy({ attempt: 2, at: first.delivery.nextAttemptAt! }, given);
  assert.equal(claimed.delivery.recipients, ['delayed', 'processing', 'sent'], 'the claim leaves the accepted recipient as reported');
  assert.equal(decideTransactionStart(start([TO_INDEX], { attempt: 2, at: first.delivery.nextAttemptAt! }), claimed), [], 'no transaction for it');
  const second = outcomeOf(claimed, record(all('accepted'), { attempt: 2, at: first.delivery.nextAttemptAt! }));
  assert.equal(second.recipients.map((r) => r.index), [CC_INDEX], 'the attempt records only the pending recipient');
  // A later report again: still out of the send set, replay after replay.
  const later = foldEmail([reportedDelay(TO_INDEX, after(4 * SECOND))], applied(claimed, [{ type: 'DeliveryAttempted', data: second }]));
  assert.equal(pendingRecipients(later.delivery), []);
  assert.is(later.delivery.finished, true);
});

// Pins: a DSN "delayed" about the copy an open attempt handed over (the provider wrote it after
// its 250), recorded before that attempt's outcome, is not undone by the outcome's `sent`: the
// recipient shows delayed, as with the two facts the other way round, and is done sending all the same.
state('given a delay reported under the open claim, when the attempt records that recipient sent, then it is marked reportedFirst, shows delayed and is done', () => {
  const given = foldEmail([reportedDelay(TO_INDEX, after(1_800))], claimedBy());
  assert.equal(given.delivery.recipients, ['delayed', 'processing', 'processing']);
  const data = outcomeOf(given, record([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'accepted')]));
  assert.equal(data.recipients.map((r) => [r.index, r.status, r.reportedFirst]), [[TO_INDEX, 'sent', true], [CC_INDEX, 'delayed', undefined], [BCC_INDEX, 'sent', undefined]]);
  const then = applied(given, [{ type: 'DeliveryAttempted', data }]);
  assert.equal(then.delivery.recipients, ['delayed', 'delayed', 'sent']);
  assert.is(then.status, 'delayed');
  assert.equal(then.delivery.done, [true, false, true], 'the 250 ended the sending to it');
  assert.equal(pendingRecipients(then.delivery), [CC_INDEX]);
  assert.is(reportsAbout(then, TO_INDEX).delayReportedLast, true, 'the reported delay is still the last thing known: the same delay again is a repeat');
  const retry = claimedBy({ attempt: 2, at: then.delivery.nextAttemptAt! }, then);
  assert.equal(retry.delivery.recipients, ['delayed', 'processing', 'sent'], 'the retry\'s claim leaves it as reported');
  assert.equal(decideTransactionStart(start([TO_INDEX], { attempt: 2, at: then.delivery.nextAttemptAt! }), retry), [], 'nothing is sent to it again');
});

state('given a delay reported under the open claim, when the attempt records it delivered (mx), failed or bounced, then the status is what the delay reported after it would make of it', () => {
  const given = foldEmail([reportedDelay(TO_INDEX, after(1_800))], claimedBy({ transport: 'mx' }));
  const then = applied(given, decideAttemptOutcome(record([result(TO_INDEX, 'delivered'), result(CC_INDEX, 'unknown'), result(BCC_INDEX, 'rejected')], { transport: 'mx' }), given, POLICY));
  assert.equal(then.delivery.recipients, ['delivered', 'failed', 'hard_bounced'], 'a delivery stands over the delay; the others\' outcomes replace');
  const unknown = foldEmail([reportedDelay(CC_INDEX, after(1_800))], claimedBy());
  const answered = applied(unknown, decideAttemptOutcome(record([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'unknown'), result(BCC_INDEX, 'accepted')]), unknown, POLICY));
  assert.equal(answered.delivery.recipients, ['sent', 'delayed', 'sent'], 'a delay reported about the copy tells more than an unknown fate');
  assert.equal(answered.delivery.done, [true, true, true]);
  assert.is(answered.delivery.finished, true);
});

state('given a delay reported before the claim (about an earlier copy), when the next attempt records the recipient sent, then nothing is marked and sent replaces it', () => {
  const first = attemptedWith([result(TO_INDEX, 'deferred'), result(CC_INDEX, 'accepted'), result(BCC_INDEX, 'accepted')]);
  const due = first.delivery.nextAttemptAt!;
  const retry = claimedBy({ attempt: 2, at: due }, foldEmail([reportedDelay(TO_INDEX, after(3 * SECOND))], first));
  assert.is(retry.delivery.recipients[TO_INDEX], 'processing', 'the claim made it processing');
  const data = outcomeOf(retry, record([result(TO_INDEX, 'accepted')], { attempt: 2, at: after(SECOND, due) }));
  assert.equal(data.recipients.map((r) => [r.index, r.status, r.reportedFirst]), [[TO_INDEX, 'sent', undefined]]);
  assert.is(applied(retry, [{ type: 'DeliveryAttempted', data }]).delivery.recipients[TO_INDEX], 'sent');
});

// Pins: a report that leaves nobody pending ends the delivery, as an attempt's outcome would, so
// the retry scheduled for the last deferred recipient is owed to no one: the state says finished
// with no next attempt, and no claim of that retry is made (the sender's work item goes with it).
const reportedAs = (index: number, outcome: RecipientReported['data']['outcome'], at: string): RecipientReported => ({
  type: 'RecipientReported',
  data: {
    reportId: `rep-${outcome}-${index}`, recipientIndex: index, address: index === TO_INDEX ? TO : index === CC_INDEX ? CC : null, outcome,
    format: 'dsn', status: outcome === 'delivered' ? '2.0.0' : '5.1.1', diagnosticCode: null, reason: `reported ${outcome}`, complaintType: null, occurredAt: at,
  },
});
/** Attempt 1: To and BCC accepted, CC deferred (a retry scheduled). */
const ccDeferred = (): EmailState => attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'accepted')]);

state('given the last pending recipient waiting for its retry, when a report makes it final, then the delivery is finished, no retry is due and none is claimed', () => {
  const given = ccDeferred();
  const retryAt = given.delivery.nextAttemptAt!;
  assert.equal(pendingRecipients(given.delivery), [CC_INDEX]);
  assert.is(given.delivery.finished, false);
  const then = foldEmail([reportedAs(CC_INDEX, 'hard_bounced', after(3 * SECOND))], given);
  assert.equal(then.delivery.recipients, ['sent', 'hard_bounced', 'sent']);
  assert.equal(pendingRecipients(then.delivery), []);
  assert.is(then.delivery.finished, true);
  assert.is(then.delivery.nextAttemptAt, null);
  assert.equal(decideClaim(claim({ attempt: 2, at: retryAt }), then, POLICY), [], 'the retry is not claimed');
  assert.equal(decideClaim(claim({ attempt: 2, at: after(HOUR, retryAt) }), then, POLICY), [], 'nor later');
});

state('given recipients waiting for a retry, when a report makes only some of them final, or only reports a delay, then the retry stays due', () => {
  const given = attemptedWith([result(TO_INDEX, 'deferred'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'accepted')]);
  const retryAt = given.delivery.nextAttemptAt!;
  const one = foldEmail([reportedAs(TO_INDEX, 'hard_bounced', after(3 * SECOND))], given);
  assert.equal(pendingRecipients(one.delivery), [CC_INDEX]);
  assert.is(one.delivery.finished, false);
  assert.is(one.delivery.nextAttemptAt, retryAt);
  assert.is(decideClaim(claim({ attempt: 2, at: retryAt }), one, POLICY).length, 1, 'the retry is claimed for the other');
  const delayed = foldEmail([reportedAs(CC_INDEX, 'delayed', after(4 * SECOND))], one);
  assert.equal(pendingRecipients(delayed.delivery), [CC_INDEX], 'a reported delay is not final');
  assert.is(delayed.delivery.finished, false);
  assert.is(delayed.delivery.nextAttemptAt, retryAt);
});

state('given the retry claimed, when a report makes its last pending recipient final, then the claim stays open until its outcome, which records nobody and finishes', () => {
  const first = ccDeferred();
  const retryAt = first.delivery.nextAttemptAt!;
  const claimed2 = claimedBy({ attempt: 2, at: retryAt }, first);
  const given = foldEmail([reportedAs(CC_INDEX, 'delivered', after(SECOND, retryAt))], claimed2);
  assert.equal(pendingRecipients(given.delivery), []);
  assert.is(given.delivery.finished, false, 'under an open claim');
  assert.ok(given.delivery.openClaim);
  assert.equal(decideTransactionStart(start([CC_INDEX], { attempt: 2, at: after(2 * SECOND, retryAt) }), given), [], 'nothing is sent to it');
  const outcome = outcomeOf(given, record([result(CC_INDEX, 'accepted')], { attempt: 2, at: after(3 * SECOND, retryAt) }));
  assert.equal(outcome.recipients, [], 'the outcome records nobody');
  assert.is(outcome.nextAttemptAt, null);
  const then = foldEmail([{ type: 'DeliveryAttempted', data: outcome }], given);
  assert.is(then.delivery.finished, true);
  assert.is(then.delivery.openClaim, null);
});

// Pins: the email's providerMessageId (the webhooks' provider_message_id) is a visible recipient's queue id, never a BCC one's.
state('given an attempt in which only the BCC recipient was accepted, then the email has no provider message id', () => {
  const given = attemptedWith([result(TO_INDEX, 'deferred'), result(CC_INDEX, 'deferred'), { ...result(BCC_INDEX, 'accepted'), providerMessageId: 'QID-BCC' }], { providerMessageId: 'QID-BCC' });
  assert.is(given.providerMessageId, null);
});

state('given an email, when an event of an unknown type is folded, then only the revision moves', () => {
  const given = claimedBy();
  const next = evolveEmail(given, recorded([unknownEvent()], 'em_test1', given.revision + 1)[0]);
  assert.equal({ ...next, revision: given.revision }, given);
  assert.is(next.revision, given.revision + 1);
});

state.run();

// ── claims ─────────────────────────────────────────────────────────────────────

const claims = suite('delivery decider: claims');

claims('given a queued email, when attempt 1 is claimed, then DeliveryClaimed and the email is processing', () => {
  const events = decideClaim(claim(), queued(), POLICY);
  assert.equal(events, [{ type: 'DeliveryClaimed', data: { attempt: 1, claimedBy: 'sender-a', transport: 'smtp', occurredAt: after(SECOND) } }]);
  const next = foldEmail(events, queued());
  assert.is(next.status, 'processing');
  assert.is(next.delivery.firstAttemptAt, after(SECOND));
  assert.equal(decideDelivery(claim(), queued(), POLICY), events, 'decideDelivery routes ClaimDelivery here');
});

claims('given no email at all, when a claim comes, then no claim', () => {
  assert.equal(decideClaim(claim(), initialEmailState, POLICY), []);
});

claims('given a suppressed email, when a claim comes, then no claim', () => {
  assert.equal(decideClaim(claim(), foldEmail([suppressed([{ address: TO, reason: 'manual' }])]), POLICY), []);
});

claims('given a finished email (every recipient sent), when the next attempt is claimed, then no claim', () => {
  const given = attemptedWith(all('accepted'));
  assert.is(given.delivery.finished, true);
  assert.equal(decideClaim(claim({ attempt: 2, at: after(HOUR) }), given, POLICY), []);
});

claims('given an open claim, when the next attempt is claimed, then no claim until the open one has an outcome', () => {
  const given = claimedBy();
  assert.equal(decideClaim(claim({ attempt: 2, at: after(HOUR) }), given, POLICY), []);
  assert.equal(decideClaim(claim({ attempt: 1, claimedBy: 'sender-b' }), given, POLICY), [], 'nor by another instance for the same attempt');
});

claims('given attempt 1 deferred, when a stale or skipping attempt number is claimed after the retry is due, then no claim', () => {
  const given = attemptedWith(all('deferred'));
  const due = given.delivery.nextAttemptAt!;
  assert.equal(decideClaim(claim({ attempt: 1, at: due }), given, POLICY), [], 'attempt 1 again');
  assert.equal(decideClaim(claim({ attempt: 3, at: due }), given, POLICY), [], 'attempt 3 before 2');
  assert.is(decideClaim(claim({ attempt: 2, at: due }), given, POLICY).length, 1, 'attempt 2 is the one');
});

claims('given attempt 1 deferred, when attempt 2 is claimed before nextAttemptAt, then no claim; at nextAttemptAt, a claim', () => {
  const given = attemptedWith(all('deferred'));
  const due = given.delivery.nextAttemptAt!;
  assert.equal(decideClaim(claim({ attempt: 2, at: after(-1, due) }), given, POLICY), []);
  assert.equal(decideClaim(claim({ attempt: 2, at: due, claimedBy: 'sender-b' }), given, POLICY)[0].data, { attempt: 2, claimedBy: 'sender-b', transport: 'smtp', occurredAt: due });
});

claims('given a claim none of whose transactions began, when another instance claims the same attempt, then nothing within the start grace; from its end, the claim is taken over', () => {
  const given = claimedBy({ at: T0 });
  const takeover = (at: string) => decideClaim(claim({ claimedBy: 'sender-b', at }), given, POLICY);
  assert.equal(takeover(after(START_GRACE_MS - 1)), []);
  const events = takeover(after(START_GRACE_MS));
  assert.equal(events, [{ type: 'DeliveryClaimed', data: { attempt: 1, claimedBy: 'sender-b', transport: 'smtp', occurredAt: after(START_GRACE_MS) } }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.openClaim, { attempt: 1, claimedBy: 'sender-b', claimedAt: after(START_GRACE_MS), transport: 'smtp', transportInstance: null, begun: [], begunAt: null });
  assert.is(next.delivery.attempts, 1, 'still attempt 1: nothing went out');
  assert.is(next.delivery.firstAttemptAt, T0, 'the retry window still counts from the first claim');
  assert.is(next.status, 'processing');
  assert.equal(decideClaim(claim({ attempt: 2, claimedBy: 'sender-b', at: after(START_GRACE_MS) }), given, POLICY), [], 'never a later attempt while one is open');
});

claims('given a claim one of whose transactions began, when another instance claims the attempt, then nothing, however late', () => {
  const given = begun([TO_INDEX], claimedBy({ at: T0 }));
  assert.equal(decideClaim(claim({ claimedBy: 'sender-b', at: after(DELIVERY_CLAIM_GRACE_MS + HOUR) }), given, POLICY), []);
});

claims.run();

// ── transaction starts ─────────────────────────────────────────────────────────

const starts = suite('delivery decider: transaction starts');

starts('given its own open claim, when the holder starts a transaction, then DeliveryTransactionStarted; the claim records who began and when', () => {
  const given = claimedBy();
  const events = decideTransactionStart(start([TO_INDEX]), given);
  assert.equal(events, [{ type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients: [TO_INDEX], occurredAt: after(1_500) } }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.openClaim?.begun, [TO_INDEX]);
  assert.is(next.delivery.openClaim?.begunAt, after(1_500));
  assert.is(next.status, 'processing', 'no status changes');
  assert.equal(decideDelivery(start([TO_INDEX]), given, POLICY), events, 'decideDelivery routes StartTransaction here');
  const both = foldEmail(decideTransactionStart(start([CC_INDEX, BCC_INDEX], { at: after(1_700) }), next), next);
  assert.equal(both.delivery.openClaim?.begun, [TO_INDEX, CC_INDEX, BCC_INDEX]);
  assert.is(both.delivery.openClaim?.begunAt, after(1_700));
});

starts('given a transaction for an address listed twice, then each of its indexes records the copy they share; a report about any of them is about all', () => {
  const given = begun([TO_INDEX, BCC_INDEX], claimedBy());
  assert.equal(given.delivery.copies, [[TO_INDEX, BCC_INDEX], undefined, [TO_INDEX, BCC_INDEX]]);
  assert.equal(copyOf(given.delivery, BCC_INDEX), [TO_INDEX, BCC_INDEX]);
  assert.equal(copyOf(given.delivery, CC_INDEX), [CC_INDEX], 'before its own transaction: itself');
  const kept = foldEmail(decideAttemptOutcome(record(all('accepted')), given, POLICY), given);
  assert.equal(copyOf(kept.delivery, TO_INDEX), [TO_INDEX, BCC_INDEX], 'kept once the attempt is recorded');
});

starts('given a claim taken over, when the old holder starts its transaction, then nothing: it must not send', () => {
  const given = applied(claimedBy({ at: T0 }), decideClaim(claim({ claimedBy: 'sender-b', at: after(START_GRACE_MS) }), claimedBy({ at: T0 }), POLICY));
  assert.equal(decideTransactionStart(start([TO_INDEX], { at: after(START_GRACE_MS + 1) }), given), []);
  assert.is(decideTransactionStart(start([TO_INDEX], { claimedBy: 'sender-b', at: after(START_GRACE_MS + 1) }), given).length, 1);
});

starts('given no open claim, another attempt, a recipient begun already, a final one, or none, then nothing', () => {
  assert.equal(decideTransactionStart(start([TO_INDEX]), queued()), []);
  assert.equal(decideTransactionStart(start([TO_INDEX], { attempt: 2 }), claimedBy()), []);
  assert.equal(decideTransactionStart(start([TO_INDEX], { claimedBy: 'sender-b' }), claimedBy()), []);
  assert.equal(decideTransactionStart(start([TO_INDEX]), begun([TO_INDEX], claimedBy())), [], 'one transaction per recipient and claim');
  assert.equal(decideTransactionStart(start([]), claimedBy()), []);
  assert.equal(decideTransactionStart(start([7]), claimedBy()), [], 'not a recipient');
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')]);
  const retry = claimedBy({ attempt: 2, at: first.delivery.nextAttemptAt! }, first);
  assert.equal(decideTransactionStart(start([TO_INDEX], { attempt: 2 }), retry), [], 'sent already');
});

starts('given a start of another attempt in the stream, then the open claim is unchanged', () => {
  const given = claimedBy();
  const next = foldEmail([{ type: 'DeliveryTransactionStarted', data: { attempt: 2, recipients: [TO_INDEX], occurredAt: after(2 * SECOND) } }], given);
  assert.equal(next.delivery.openClaim, given.delivery.openClaim);
  assert.is(next.revision, given.revision + 1);
});

starts.run();

// ── outcomes ───────────────────────────────────────────────────────────────────

const outcomes = suite('delivery decider: attempt outcomes');

outcomes('given an open claim, when its holder records the attempt, then DeliveryAttempted for every pending recipient', () => {
  const data = outcomeOf(claimedBy(), record(all('accepted')));
  assert.equal(data, {
    attempt: 1, transport: 'smtp', messageId: '<m1@example.test>', providerMessageId: 'prov-1',
    recipients: [
      { index: 0, address: TO, status: 'sent', smtpCode: 250, enhancedCode: '2.0.0', response: 'server said accepted' },
      { index: 1, address: CC, status: 'sent', smtpCode: 250, enhancedCode: '2.0.0', response: 'server said accepted' },
      { index: 2, address: null, status: 'sent', smtpCode: 250, enhancedCode: '2.0.0', response: 'server said accepted' },
    ],
    nextAttemptAt: null, failureCode: null, occurredAt: after(2 * SECOND),
  });
  assert.equal(decideDelivery(record(all('accepted')), claimedBy(), POLICY).map((e) => e.type), ['DeliveryAttempted']);
});

outcomes('given each transaction\'s queue id, then every recipient keeps its own', () => {
  const results = all('accepted').map((r, i) => ({ ...r, providerMessageId: `Q${i}` }));
  const data = outcomeOf(claimedBy(), record(results));
  assert.equal(data.recipients.map((r) => [r.index, r.providerMessageId]), [[0, 'Q0'], [1, 'Q1'], [2, 'Q2']]);
});

outcomes('given no open claim, when an attempt is recorded, then nothing', () => {
  assert.equal(decideAttemptOutcome(record(all('accepted')), queued(), POLICY), []);
  assert.equal(decideAttemptOutcome(record(all('accepted')), attemptedWith(all('deferred')), POLICY), [], 'the claim already has its outcome');
});

outcomes('given an open claim, when another instance or another attempt number records, then nothing', () => {
  assert.equal(decideAttemptOutcome(record(all('accepted'), { claimedBy: 'sender-b' }), claimedBy(), POLICY), []);
  assert.equal(decideAttemptOutcome(record(all('accepted'), { attempt: 2 }), claimedBy(), POLICY), []);
});

outcomes('given smtp, when the relay accepts, then sent (not delivered) and the email is finished as sent', () => {
  const next = attemptedWith(all('accepted'));
  assert.equal(next.delivery.recipients, ['sent', 'sent', 'sent']);
  assert.is(next.status, 'sent');
  assert.is(next.delivery.finished, true);
  assert.is(next.delivery.openClaim, null);
});

outcomes('given mx, when the recipient’s server takes it, then delivered', () => {
  const data = outcomeOf(claimedBy({ transport: 'mx' }), record(all('delivered'), { transport: 'mx' }));
  assert.equal(statuses(data), ['delivered', 'delivered', 'delivered']);
  assert.is(data.failureCode, null);
});

outcomes('given an unknown-user reply at RCPT, then a hard bounce whichever the next hop: the recipient\'s MX, a smarthost or the outbox', () => {
  for (const transport of ['mx', 'smtp', 'outbox']) {
    const data = outcomeOf(claimedBy({ transport }), record(all('rejected'), { transport }));
    assert.equal(statuses(data), ['hard_bounced', 'hard_bounced', 'hard_bounced'], transport);
    assert.is(data.failureCode, null, `${transport}: a bounce is the recipient's, not a failure of the provider`);
    assert.is(data.nextAttemptAt, null, transport);
  }
  // The wording alone, without an enhanced code, says the same.
  const worded = [TO_INDEX, CC_INDEX, BCC_INDEX].map((index) => ({ index, result: 'rejected' as const, smtpCode: 550, enhancedCode: null, response: '550 <ann@example.test>: Recipient address rejected: User unknown in local recipient table', stage: 'rcpt_to' }));
  assert.equal(statuses(outcomeOf(claimedBy(), record(worded))), ['hard_bounced', 'hard_bounced', 'hard_bounced']);
});

outcomes('given a refusal of the message (spam, policy, size) or of Relay (before RCPT), then no hard bounce: rejected by a provider, soft_bounced by the recipient\'s MX', () => {
  const refusals = [
    { smtpCode: 554, enhancedCode: '5.7.1', response: '554 5.7.1 Message rejected as spam', stage: 'data' },
    { smtpCode: 552, enhancedCode: '5.2.2', response: '552 5.2.2 Mailbox full', stage: 'rcpt_to' },
    { smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 Sender address rejected: User unknown', stage: 'mail_from' },
    { smtpCode: 554, enhancedCode: null, response: '554 Transaction failed: user unknown', stage: 'data' },
  ];
  for (const refusal of refusals) {
    const results = [TO_INDEX, CC_INDEX, BCC_INDEX].map((index) => ({ index, result: 'rejected' as const, ...refusal }));
    const smtp = outcomeOf(claimedBy({ transport: 'smtp' }), record(results, { transport: 'smtp' }));
    assert.equal(statuses(smtp), ['rejected', 'rejected', 'rejected'], refusal.response);
    assert.is(smtp.failureCode, 'provider_rejected');
    const mx = outcomeOf(claimedBy({ transport: 'mx' }), record(results, { transport: 'mx' }));
    assert.equal(statuses(mx), ['soft_bounced', 'soft_bounced', 'soft_bounced'], refusal.response);
    assert.is(mx.failureCode, null);
  }
  // After DATA only an X.1.x status condemns the address.
  const afterData = [TO_INDEX, CC_INDEX, BCC_INDEX].map((index) => ({ index, result: 'rejected' as const, smtpCode: 550, enhancedCode: '5.1.1', response: '550 5.1.1 Mailbox does not exist', stage: 'data' }));
  assert.equal(statuses(outcomeOf(claimedBy({ transport: 'smtp' }), record(afterData, { transport: 'smtp' }))), ['hard_bounced', 'hard_bounced', 'hard_bounced']);
});

outcomes('given the mx transport\'s own final verdicts (no such domain, null MX, no usable MX host), then hard bounces', () => {
  const verdicts = [
    { enhancedCode: '5.1.2', response: 'missing.test does not exist (ENOTFOUND)' },
    { enhancedCode: '5.1.10', response: 'nullmx.test publishes a null MX (RFC 7505): it accepts no mail' },
    { enhancedCode: '5.4.4', response: 'no MX host of internal.test has a public address: mx.internal.test resolves only to addresses Relay does not deliver to: 127.0.0.2 (loopback)' },
  ];
  for (const verdict of verdicts) {
    const results = [TO_INDEX, CC_INDEX, BCC_INDEX].map((index) => ({ index, result: 'rejected' as const, smtpCode: null, stage: 'dns', ...verdict }));
    assert.equal(statuses(outcomeOf(claimedBy({ transport: 'mx' }), record(results, { transport: 'mx' }))), ['hard_bounced', 'hard_bounced', 'hard_bounced'], verdict.response);
  }
});

outcomes('given several kinds of failure in one attempt, then the failure code is delivery_unknown, else provider_unavailable, else provider_rejected', () => {
  const at = after(DELIVERY_RETRY_WINDOW_MS + HOUR);
  // A refusal of the message by the provider (not of the address): rejected.
  const refused = (index: number): RecipientResultReport => ({ index, result: 'rejected', smtpCode: 554, enhancedCode: '5.7.1', response: '554 5.7.1 Message rejected', stage: 'data' });
  const code = (...results: TransportResult[]) => outcomeOf(claimedBy(), record(results.map((r, i) => (r === 'rejected' ? refused(i) : result(i, r))), { at })).failureCode;
  assert.is(code('unknown', 'deferred', 'rejected'), 'delivery_unknown');
  assert.is(code('rejected', 'deferred', 'accepted'), 'provider_unavailable', 'deferred past the window is failed');
  assert.is(code('rejected', 'accepted', 'accepted'), 'provider_rejected');
  assert.is(code('accepted', 'accepted', 'delivered'), null);
});

outcomes('given several kinds of failure in one attempt, when it is recorded, then each failed or rejected recipient carries the code of its own result', () => {
  const at = after(DELIVERY_RETRY_WINDOW_MS + HOUR);
  const refused = (index: number): RecipientResultReport => ({ index, result: 'rejected', smtpCode: 554, enhancedCode: '5.7.1', response: '554 5.7.1 Message rejected', stage: 'data' });
  const codes = (...results: TransportResult[]) => outcomeOf(claimedBy(), record(results.map((r, i) => (r === 'rejected' ? refused(i) : result(i, r))), { at }))
    .recipients.map((r) => [r.status, r.failureCode]);
  assert.equal(codes('rejected', 'deferred', 'unknown'), [['rejected', 'provider_rejected'], ['failed', 'provider_unavailable'], ['failed', 'delivery_unknown']]);
  assert.equal(codes('accepted', 'delivered', 'unknown'), [['sent', undefined], ['delivered', undefined], ['failed', 'delivery_unknown']], 'no code for a success');
  const retrying = outcomeOf(claimedBy(), record([result(TO_INDEX, 'deferred'), result(CC_INDEX, 'unknown'), result(BCC_INDEX, 'accepted')]));
  assert.equal(retrying.recipients.map((r) => [r.status, r.failureCode]), [['delayed', undefined], ['failed', 'delivery_unknown'], ['sent', undefined]], 'a delay has none');
  const mx = outcomeOf(claimedBy({ transport: 'mx' }), record([refused(TO_INDEX), result(CC_INDEX, 'unknown'), result(BCC_INDEX, 'deferred')], { transport: 'mx', at }));
  assert.equal(mx.recipients.map((r) => [r.status, r.failureCode]), [['soft_bounced', undefined], ['failed', 'delivery_unknown'], ['soft_bounced', undefined]], 'bounces are the recipient\'s, not failures');
});

outcomes('given a deferral on attempt 1, then delayed and the first retry 30 s later (within a minute)', () => {
  const data = outcomeOf(claimedBy(), record(all('deferred')));
  assert.equal(statuses(data), ['delayed', 'delayed', 'delayed']);
  assert.is(data.nextAttemptAt, after(30 * SECOND, after(2 * SECOND)));
  assert.ok(Date.parse(data.nextAttemptAt!) - Date.parse(data.occurredAt) <= MINUTE);
  assert.is(data.failureCode, null);
  const next = foldEmail([{ type: 'DeliveryAttempted', data }], claimedBy());
  assert.is(next.delivery.finished, false);
  assert.is(next.status, 'delayed');
});

outcomes('given a recipient the transport said nothing about, then it was not attempted: delayed for a retry', () => {
  const data = outcomeOf(claimedBy(), record([result(TO_INDEX, 'accepted')]));
  assert.equal(statuses(data), ['sent', 'delayed', 'delayed']);
  assert.equal(data.recipients.slice(1).map((r) => [r.smtpCode, r.response]), [[null, 'not attempted'], [null, 'not attempted']]);
  assert.ok(data.nextAttemptAt !== null);
});

outcomes('given an attempt with every result accepted or refused, then no retry is scheduled', () => {
  const data = outcomeOf(claimedBy(), record([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'rejected'), result(BCC_INDEX, 'accepted')]));
  assert.is(data.nextAttemptAt, null);
});

outcomes('given an unknown fate, then failed with delivery_unknown (never retried: it may have gone out)', () => {
  const data = outcomeOf(claimedBy(), record(all('unknown')));
  assert.equal(statuses(data), ['failed', 'failed', 'failed']);
  assert.is(data.failureCode, 'delivery_unknown');
  assert.is(data.nextAttemptAt, null);
});

outcomes('given an unknown fate for one and a deferral for the others, then the unknown one failed, the others delayed', () => {
  const data = outcomeOf(claimedBy(), record([result(TO_INDEX, 'unknown'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')]));
  assert.equal(statuses(data), ['failed', 'delayed', 'delayed']);
  assert.is(data.failureCode, 'delivery_unknown');
  assert.ok(data.nextAttemptAt !== null);
});

outcomes('given the BCC recipient, then its outcome is recorded by index with address null', () => {
  const data = outcomeOf(claimedBy(), record(all('accepted')));
  assert.equal(data.recipients.map((r) => [r.index, r.address]), [[0, TO], [1, CC], [2, null]]);
});

outcomes('given recipients already finished, when a later attempt reports them again, then only pending ones are recorded', () => {
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')]);
  const due = first.delivery.nextAttemptAt!;
  const given = claimedBy({ attempt: 2, at: due }, first);
  const data = outcomeOf(given, record([result(TO_INDEX, 'rejected'), result(CC_INDEX, 'accepted'), result(BCC_INDEX, 'accepted')], { attempt: 2, at: after(SECOND, due) }));
  assert.equal(data.recipients.map((r) => [r.index, r.status]), [[1, 'sent'], [2, 'sent']]);
  assert.is(data.failureCode, null, 'the ignored refusal leaves no failure code');
});

outcomes('given a deferral over smtp, when the relay accepts the retry, then the recipients and the email are sent', () => {
  const first = attemptedWith(all('deferred'));
  const due = first.delivery.nextAttemptAt!;
  const given = claimedBy({ attempt: 2, at: due }, first);
  const next = applied(given, decideAttemptOutcome(record(all('accepted'), { attempt: 2, at: after(SECOND, due) }), given, POLICY));
  assert.equal(next.delivery.recipients, ['sent', 'sent', 'sent']);
  assert.is(next.status, 'sent');
  assert.equal(pendingRecipients(next.delivery), []);
});

outcomes('given outcomes, then the email status follows the order: To delivered and CC hard bounced is hard_bounced', () => {
  const next = attemptedWith([result(TO_INDEX, 'delivered'), result(CC_INDEX, 'rejected'), result(BCC_INDEX, 'delivered')], { transport: 'mx' });
  assert.equal(next.delivery.recipients, ['delivered', 'hard_bounced', 'delivered']);
  assert.is(next.status, 'hard_bounced');
});

outcomes('given outcomes, then a BCC recipient’s outcome never changes the email status', () => {
  const bounced = attemptedWith([result(TO_INDEX, 'delivered'), result(CC_INDEX, 'delivered'), result(BCC_INDEX, 'rejected')], { transport: 'mx' });
  assert.equal(bounced.delivery.recipients, ['delivered', 'delivered', 'hard_bounced']);
  assert.is(bounced.status, 'delivered');
  const failed = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'accepted'), result(BCC_INDEX, 'unknown')]);
  assert.is(failed.status, 'sent');
});

outcomes.run();

// ── retries ────────────────────────────────────────────────────────────────────

const retries = suite('delivery decider: retry schedule and window');

/** Attempts of one email deferred every time (each claimed when due), until no retry is scheduled. */
function deferEveryTime(transport: string, policy: DeliveryPolicy) {
  let given = queued();
  let at = T0;
  const delays: number[] = [];
  for (let attempt = 1; attempt <= 60; attempt++) {
    given = claimedBy({ attempt, at, transport }, given);
    const data = outcomeOf(given, record(all('deferred'), { attempt, at, transport }), policy);
    given = foldEmail([{ type: 'DeliveryAttempted', data }], given);
    if (data.nextAttemptAt === null) return { delays, last: data, state: given, attempts: attempt };
    delays.push(Date.parse(data.nextAttemptAt) - Date.parse(at));
    at = data.nextAttemptAt;
  }
  return { delays, last: null, state: given, attempts: Infinity };
}

retries('given deferrals every time over smtp, then retries at 30 s, 2, 10, 30 min, 1, 2 h, then every 4 h, and failed/provider_unavailable once past 24 h', () => {
  const { delays, last, state: final, attempts } = deferEveryTime('smtp', POLICY);
  assert.equal(delays, [30 * SECOND, 2 * MINUTE, 10 * MINUTE, 30 * MINUTE, HOUR, 2 * HOUR, 4 * HOUR, 4 * HOUR, 4 * HOUR, 4 * HOUR, 4 * HOUR]);
  assert.is(attempts, 12);
  assert.ok(delays.reduce((a, b) => a + b, 0) <= DELIVERY_RETRY_WINDOW_MS);
  assert.equal(statuses(last!), ['failed', 'failed', 'failed']);
  assert.is(last!.failureCode, 'provider_unavailable');
  assert.is(final.delivery.finished, true);
  assert.is(final.status, 'failed');
});

retries('given deferrals every time over mx, then once past 24 h the recipients soft bounced (no failure code)', () => {
  const { last, attempts } = deferEveryTime('mx', POLICY);
  assert.is(attempts, 12);
  assert.equal(statuses(last!), ['soft_bounced', 'soft_bounced', 'soft_bounced']);
  assert.is(last!.failureCode, null);
});

retries('given the policy scaled by 0.001 (RELAY_DELIVERY_RETRY_SCALE), then every delay and the window shrink a thousand times', () => {
  const { delays, attempts, last } = deferEveryTime('smtp', scaleDeliveryPolicy(POLICY, 0.001));
  assert.equal(delays, [30, 120, 600, 1_800, 3_600, 7_200, 14_400, 14_400, 14_400, 14_400, 14_400]);
  assert.is(attempts, 12);
  assert.is(last!.failureCode, 'provider_unavailable');
});

retries('given the policy scaled by 0.001 and a first attempt 90 s ago, then a deferral is final (the scaled window is 86.4 s)', () => {
  const data = outcomeOf(claimedBy({ at: T0 }), record(all('deferred'), { at: after(90 * SECOND) }), scaleDeliveryPolicy(POLICY, 0.001));
  assert.equal(statuses(data), ['failed', 'failed', 'failed']);
  const unscaled = outcomeOf(claimedBy({ at: T0 }), record(all('deferred'), { at: after(90 * SECOND) }));
  assert.equal(statuses(unscaled), ['delayed', 'delayed', 'delayed']);
});

retries('nextAttemptAt: due exactly at the end of the window is still a retry; a millisecond later, none', () => {
  const lastChance = after(DELIVERY_RETRY_WINDOW_MS - 30 * SECOND);
  assert.is(nextAttemptAt(1, T0, lastChance, POLICY), after(DELIVERY_RETRY_WINDOW_MS));
  assert.is(nextAttemptAt(1, T0, after(1, lastChance), POLICY), null);
  assert.is(nextAttemptAt(100, T0, T0, POLICY), after(POLICY.retryDelaysMs.at(-1)!), 'attempts past the list use its last delay');
  assert.is(nextAttemptAt(2, T0, T0, scaleDeliveryPolicy(POLICY, 0.5)), after(MINUTE));
});

retries.run();

// ── failures and recovery ───────────────────────────────────────────────────────

const failures = suite('delivery decider: failures and delivery_unknown recovery');

failures('given an open claim, when its holder fails the delivery, then DeliveryFailed for every pending recipient (BCC by index only)', () => {
  const given = claimedBy();
  const events = decideFailure(fail(), given, POLICY);
  assert.equal(events, [{
    type: 'DeliveryFailed',
    data: {
      attempt: 1, failureCode: 'content_expired', reason: 'the body was destroyed',
      recipients: [{ index: 0, address: TO }, { index: 1, address: CC }, { index: 2, address: null }], occurredAt: after(2 * SECOND),
    },
  }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['failed', 'failed', 'failed']);
  assert.is(next.delivery.finished, true);
  assert.is(next.status, 'failed');
  assert.equal(decideDelivery(fail(), given, POLICY), events, 'decideDelivery routes FailDelivery here');
});

failures('given an open claim, when its holder fails it, then no grace period applies', () => {
  assert.is(decideFailure(fail({ at: after(SECOND) }), claimedBy(), POLICY).length, 1);
});

failures('given no open claim, or a failure for another attempt, or by another instance, then nothing', () => {
  assert.equal(decideFailure(fail(), queued(), POLICY), []);
  assert.equal(decideFailure(fail(), attemptedWith(all('accepted')), POLICY), []);
  assert.equal(decideFailure(fail({ attempt: 2 }), claimedBy(), POLICY), []);
  assert.equal(decideFailure(fail({ claimedBy: 'sender-b' }), claimedBy(), POLICY), []);
});

failures('given a transaction begun and left open, when recovery (claimedBy null) comes within the grace after its start, then nothing; from its end, delivery_unknown', () => {
  const given = begun([TO_INDEX, CC_INDEX, BCC_INDEX], claimedBy({ at: T0 }), { at: after(SECOND) });
  const recover = (at: string) => decideFailure(fail({ claimedBy: null, failureCode: 'delivery_unknown', reason: 'claim left open', at }), given, POLICY);
  assert.equal(recover(after(DELIVERY_CLAIM_GRACE_MS)), [], 'the grace counts from the start, not the claim');
  assert.equal(recover(after(2 * SECOND)), []);
  assert.is(recover(after(SECOND + DELIVERY_CLAIM_GRACE_MS))[0].data.failureCode, 'delivery_unknown');
  assert.is(recover(after(DELIVERY_CLAIM_GRACE_MS + HOUR)).length, 1);
  assert.equal(claimDeadline(given, POLICY), { kind: 'unknown', at: after(SECOND + DELIVERY_CLAIM_GRACE_MS) });
});

failures('given a claim none of whose transactions began, when recovery comes, then nothing, however late: it is taken over instead', () => {
  const given = claimedBy({ at: T0 });
  assert.equal(decideFailure(fail({ claimedBy: null, failureCode: 'delivery_unknown', at: after(DELIVERY_CLAIM_GRACE_MS + HOUR) }), given, POLICY), []);
  assert.equal(claimDeadline(given, POLICY), { kind: 'takeover', at: after(START_GRACE_MS) });
  assert.is(claimDeadline(queued(), POLICY), null);
});

failures('given a scaled grace period, when recovery comes after it, then delivery_unknown', () => {
  const given = begun([TO_INDEX], claimedBy({ at: T0 }), { at: T0 });
  const scaled = scaleDeliveryPolicy(POLICY, 0.001);
  const graceMs = DELIVERY_CLAIM_GRACE_MS * 0.001;
  assert.is(scaled.claimGraceMs, graceMs);
  assert.is(scaled.claimStartGraceMs, START_GRACE_MS * 0.001);
  assert.equal(decideFailure(fail({ claimedBy: null, at: after(graceMs - 1) }), given, scaled), []);
  assert.is(decideFailure(fail({ claimedBy: null, at: after(graceMs) }), given, scaled).length, 1);
});

failures('given a retry left open after some recipients were sent, when recovered, then only the pending ones whose transaction began fail and the email status is failed', () => {
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'deferred')]);
  const due = first.delivery.nextAttemptAt!;
  const given = begun([CC_INDEX, BCC_INDEX], claimedBy({ attempt: 2, at: due }, first), { attempt: 2, at: due });
  const events = decideFailure(fail({ attempt: 2, claimedBy: null, failureCode: 'delivery_unknown', at: after(DELIVERY_CLAIM_GRACE_MS, due) }), given, POLICY);
  assert.equal(events[0].data.recipients, [{ index: 1, address: CC }, { index: 2, address: null }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['sent', 'failed', 'failed']);
  assert.is(next.status, 'failed');
  assert.is(next.delivery.finished, true);
});

failures('given a claim where only some transactions began, when recovered, then only those are delivery_unknown; the others are claimable at once as the next attempt', () => {
  const given = begun([CC_INDEX], claimedBy({ at: T0 }), { at: after(SECOND) });
  const at = after(SECOND + DELIVERY_CLAIM_GRACE_MS);
  const events = decideFailure(fail({ claimedBy: null, failureCode: 'delivery_unknown', at }), given, POLICY);
  assert.equal(events[0].data.recipients, [{ index: CC_INDEX, address: CC }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['processing', 'failed', 'processing']);
  assert.is(next.delivery.finished, false);
  assert.is(next.delivery.openClaim, null);
  assert.is(next.delivery.nextAttemptAt, null);
  const retry = decideClaim(claim({ attempt: 2, at, claimedBy: 'sender-b' }), next, POLICY);
  assert.is(retry.length, 1, 'attempt 2 is due at once');
  assert.equal(pendingRecipients(foldEmail(retry, next).delivery), [TO_INDEX, BCC_INDEX]);
});

failures('given a delay reported under the open claim, when recovery declares the begun transactions delivery_unknown, then that recipient is marked reportedFirst and shows the delay', () => {
  const given = foldEmail([reportedDelay(TO_INDEX, after(2 * SECOND))], begun([TO_INDEX, CC_INDEX], claimedBy({ at: T0 }), { at: after(SECOND) }));
  const events = decideFailure(fail({ claimedBy: null, failureCode: 'delivery_unknown', at: after(SECOND + DELIVERY_CLAIM_GRACE_MS) }), given, POLICY);
  assert.equal(events[0].data.recipients, [{ index: TO_INDEX, address: TO, reportedFirst: true }, { index: CC_INDEX, address: CC }]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['delayed', 'failed', 'processing']);
  assert.equal(pendingRecipients(next.delivery), [BCC_INDEX], 'the reported recipient is done: its copy went out');
});

failures('given a claim whose holder gives up (content expired) after one transaction began, then every pending recipient fails', () => {
  const given = begun([TO_INDEX], claimedBy());
  assert.equal(decideFailure(fail(), given, POLICY)[0].data.recipients.map((r) => r.index), [TO_INDEX, CC_INDEX, BCC_INDEX]);
});

failures.run();

// ── recovery settled by the transport ───────────────────────────────────────────

const settledRecovery = suite('delivery decider: recovery the transport settles');

const MESSAGE_ID = 'em_test1@example.test';
/** The outbox directory the claims below wrote to (MailTransport.instance). */
const OUTBOX_A = 'outbox-a-0123456789abcdef';
const written = (index: number): SettledTransaction => ({ index, result: 'accepted', response: 'written to the outbox as em_test1.eml', providerMessageId: MESSAGE_ID });
const notWritten = (index: number): SettledTransaction => ({ index, result: 'not_sent', response: 'not written to the outbox: the sender stopped before the write was complete' });
/** The recovery of attempt 1 (claimedBy null) with the outbox's answer. */
const recoverWith = (recipients: SettledTransaction[], overrides: Partial<FailDelivery> = {}): FailDelivery => fail({
  claimedBy: null, failureCode: 'delivery_unknown', reason: 'the sender stopped during the transaction',
  settled: { transport: 'outbox', transportInstance: OUTBOX_A, messageId: MESSAGE_ID, recipients }, ...overrides,
});
/** Attempt 1 claimed for the outbox at T0, every transaction begun at +1 s and left open. */
const leftOpen = (recipients = [TO_INDEX, CC_INDEX, BCC_INDEX], claimOverrides: Partial<ClaimDelivery> = {}): EmailState =>
  begun(recipients, claimedBy({ at: T0, transport: 'outbox', transportInstance: OUTBOX_A, ...claimOverrides }), { at: after(SECOND) });
const GRACE_END = after(SECOND + DELIVERY_CLAIM_GRACE_MS);

settledRecovery('given transactions left open, when the outbox says what it holds, then nothing within the grace; from its end, the attempt\'s outcome: written ones sent, the others delayed and retried on the schedule', () => {
  const given = leftOpen();
  const command = recoverWith([written(TO_INDEX), notWritten(CC_INDEX), written(BCC_INDEX)], { at: GRACE_END });
  assert.equal(decideRecovery({ ...command, at: after(DELIVERY_CLAIM_GRACE_MS) }, given, POLICY), [], 'the grace counts from the last start');
  const events = decideRecovery(command, given, POLICY);
  assert.equal(events, [{
    type: 'DeliveryAttempted',
    data: {
      attempt: 1, transport: 'outbox', messageId: MESSAGE_ID, providerMessageId: MESSAGE_ID,
      recipients: [
        { index: TO_INDEX, address: TO, status: 'sent', smtpCode: null, enhancedCode: null, response: 'written to the outbox as em_test1.eml', providerMessageId: MESSAGE_ID },
        { index: CC_INDEX, address: CC, status: 'delayed', smtpCode: null, enhancedCode: null, response: 'not written to the outbox: the sender stopped before the write was complete' },
        { index: BCC_INDEX, address: null, status: 'sent', smtpCode: null, enhancedCode: null, response: 'written to the outbox as em_test1.eml', providerMessageId: MESSAGE_ID },
      ],
      nextAttemptAt: after(30 * SECOND, GRACE_END), failureCode: null, occurredAt: GRACE_END,
    },
  }]);
  assert.equal(decideDelivery(command, given, POLICY), events, 'decideDelivery routes a recovery here');
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['sent', 'delayed', 'sent']);
  assert.is(next.status, 'delayed');
  assert.is(next.delivery.openClaim, null);
  assert.is(next.delivery.finished, false);
  assert.is(next.providerMessageId, MESSAGE_ID);
  assert.equal(pendingRecipients(next.delivery), [CC_INDEX], 'only the one not written is sent again');
  assert.is(decideClaim(claim({ attempt: 2, at: after(29 * SECOND, GRACE_END) }), next, POLICY).length, 0);
  assert.is(decideClaim(claim({ attempt: 2, at: after(30 * SECOND, GRACE_END) }), next, POLICY).length, 1);
});

settledRecovery('given every open transaction written, when recovered, then every recipient sent and the delivery finished, no failure code', () => {
  const events = decideRecovery(recoverWith([written(TO_INDEX), written(CC_INDEX), written(BCC_INDEX)], { at: GRACE_END }), leftOpen(), POLICY);
  const [outcome] = events as DeliveryAttempted[];
  assert.equal(statuses(outcome.data), ['sent', 'sent', 'sent']);
  assert.is(outcome.data.failureCode, null);
  assert.is(outcome.data.nextAttemptAt, null);
  const next = foldEmail(events, leftOpen());
  assert.is(next.status, 'sent');
  assert.is(next.delivery.finished, true);
});

settledRecovery('given nothing written, when recovered, then no recipient failed: all delayed, retried on the schedule', () => {
  const [outcome] = decideRecovery(recoverWith([notWritten(TO_INDEX), notWritten(CC_INDEX), notWritten(BCC_INDEX)], { at: GRACE_END }), leftOpen(), POLICY) as DeliveryAttempted[];
  assert.equal(statuses(outcome.data), ['delayed', 'delayed', 'delayed']);
  assert.equal(outcome.data.recipients.map((r) => r.failureCode), [undefined, undefined, undefined]);
  assert.is(outcome.data.nextAttemptAt, after(30 * SECOND, GRACE_END));
  assert.is(outcome.data.providerMessageId, null);
});

settledRecovery('given a begun recipient the answer leaves out (the transport cannot tell), then that one alone failed with delivery_unknown', () => {
  const [outcome] = decideRecovery(recoverWith([written(TO_INDEX), notWritten(BCC_INDEX)], { at: GRACE_END }), leftOpen(), POLICY) as DeliveryAttempted[];
  assert.equal(statuses(outcome.data), ['sent', 'failed', 'delayed']);
  assert.equal(outcome.data.recipients[CC_INDEX], {
    index: CC_INDEX, address: CC, status: 'failed', smtpCode: null, enhancedCode: null, response: 'the sender stopped during the transaction', failureCode: 'delivery_unknown',
  });
  assert.is(outcome.data.failureCode, 'delivery_unknown');
});

settledRecovery('given a recipient whose transaction had not begun, when recovered with the answer, then it is not attempted: delayed and retried with those not written', () => {
  const given = leftOpen([TO_INDEX]);
  const [outcome] = decideRecovery(recoverWith([written(TO_INDEX)], { at: GRACE_END }), given, POLICY) as DeliveryAttempted[];
  assert.equal(statuses(outcome.data), ['sent', 'delayed', 'delayed']);
  assert.match(outcome.data.recipients[CC_INDEX].response, /not attempted/);
  assert.is(outcome.data.nextAttemptAt, after(30 * SECOND, GRACE_END));
  assert.equal(pendingRecipients(foldEmail([outcome], given).delivery), [CC_INDEX, BCC_INDEX]);
});

settledRecovery('given a retry past the window, when what was not written is recovered, then failed with provider_unavailable, as any outbox deferral then', () => {
  const first = attemptedWith([result(TO_INDEX, 'accepted'), result(CC_INDEX, 'deferred'), result(BCC_INDEX, 'accepted')], { transport: 'outbox' });
  const late = after(DELIVERY_RETRY_WINDOW_MS + HOUR);
  const given = begun([CC_INDEX], claimedBy({ attempt: 2, at: late, transport: 'outbox', transportInstance: OUTBOX_A }, first), { attempt: 2, at: late });
  const [outcome] = decideRecovery(recoverWith([notWritten(CC_INDEX)], { attempt: 2, at: after(DELIVERY_CLAIM_GRACE_MS, late) }), given, POLICY) as DeliveryAttempted[];
  assert.equal(outcome.data.recipients.map((r) => [r.index, r.status, r.failureCode]), [[CC_INDEX, 'failed', 'provider_unavailable']]);
  assert.is(outcome.data.nextAttemptAt, null);
});

settledRecovery('given a claim none of whose transactions began, another attempt, or no open claim, when a settled recovery comes, then nothing', () => {
  const late = after(DELIVERY_CLAIM_GRACE_MS + HOUR);
  assert.equal(decideRecovery(recoverWith([written(TO_INDEX)], { at: late }), claimedBy({ at: T0 }), POLICY), [], 'taken over instead');
  assert.equal(decideRecovery(recoverWith([written(TO_INDEX)], { attempt: 2, at: late }), leftOpen(), POLICY), []);
  assert.equal(decideRecovery(recoverWith([written(TO_INDEX)], { at: late }), queued(), POLICY), []);
  assert.equal(decideRecovery(recoverWith([written(TO_INDEX)], { at: late }), attemptedWith(all('accepted')), POLICY), []);
});

settledRecovery('given a delay reported under the open claim, when the written recipient is recorded sent, then it is marked reportedFirst and shows the delay', () => {
  const given = foldEmail([reportedDelay(TO_INDEX, after(2 * SECOND))], leftOpen([TO_INDEX]));
  const [outcome] = decideRecovery(recoverWith([written(TO_INDEX)], { at: GRACE_END }), given, POLICY) as DeliveryAttempted[];
  assert.is(outcome.data.recipients[0].reportedFirst, true);
  assert.is(foldEmail([outcome], given).delivery.recipients[TO_INDEX], 'delayed');
});

settledRecovery('given an answer, when the holder itself fails the claim (claimedBy set), then the answer is no part of it: every pending recipient fails with its code', () => {
  const given = leftOpen();
  const events = decideRecovery(recoverWith([written(TO_INDEX)], { claimedBy: 'sender-a', failureCode: 'content_expired' }), given, POLICY);
  assert.equal(events.map((e) => e.type), ['DeliveryFailed']);
  assert.equal(foldEmail(events, given).delivery.recipients, ['failed', 'failed', 'failed']);
});

settledRecovery('given no answer (a transport that cannot tell), when recovered, then every begun recipient delivery_unknown, as before', () => {
  const { settled: _, ...unsettled } = recoverWith([], { at: GRACE_END });
  const events = decideRecovery(unsettled, leftOpen([CC_INDEX]), POLICY);
  assert.equal(events.map((e) => e.type), ['DeliveryFailed']);
  assert.equal((events[0] as { data: { failureCode: string } }).data.failureCode, 'delivery_unknown');
});

settledRecovery('given a claim that names its outbox, then the claim event and the open claim keep it; a claim that names none keeps null', () => {
  const given = queued();
  const [claimed] = decideClaim(claim({ transport: 'outbox', transportInstance: OUTBOX_A }), given, POLICY);
  assert.equal(claimed.data, { attempt: 1, claimedBy: 'sender-a', transport: 'outbox', transportInstance: OUTBOX_A, occurredAt: after(SECOND) });
  const open = foldEmail([claimed], given).delivery.openClaim;
  assert.equal([open?.transport, open?.transportInstance], ['outbox', OUTBOX_A]);
  const [unnamed] = decideClaim(claim({ transport: 'outbox' }), given, POLICY);
  assert.not.ok('transportInstance' in unnamed.data, 'no field when the transport has no instance');
  assert.is(foldEmail([unnamed], given).delivery.openClaim?.transportInstance, null);
});

settledRecovery('given a claim written to one outbox, when another outbox answers (another directory: another host, another data directory), then its answer is none: every begun recipient delivery_unknown, none sent again', () => {
  const given = leftOpen([TO_INDEX, CC_INDEX]);
  const other = recoverWith([notWritten(TO_INDEX), notWritten(CC_INDEX)], { at: GRACE_END });
  const events = decideRecovery({ ...other, settled: { ...other.settled!, transportInstance: 'outbox-b-0123456789abcdef' } }, given, POLICY);
  assert.equal(events, decideRecovery({ ...other, settled: undefined }, given, POLICY), 'as without an answer');
  assert.equal(events.map((e) => e.type), ['DeliveryFailed']);
  const [failed] = events as Array<{ data: { failureCode: string; recipients: Array<{ index: number }> } }>;
  assert.is(failed.data.failureCode, 'delivery_unknown');
  assert.equal(failed.data.recipients.map((r) => r.index), [TO_INDEX, CC_INDEX]);
  const next = foldEmail(events, given);
  assert.equal(next.delivery.recipients, ['failed', 'failed', 'processing']);
  assert.equal(pendingRecipients(next.delivery), [BCC_INDEX], 'only the one never begun is sent again');
});

settledRecovery('given a claim that names no outbox (recorded before claims did), when an outbox answers, then its answer is none: delivery_unknown', () => {
  const given = begun([TO_INDEX], claimedBy({ at: T0, transport: 'outbox' }), { at: after(SECOND) });
  const events = decideRecovery(recoverWith([written(TO_INDEX)], { at: GRACE_END }), given, POLICY);
  assert.equal(events.map((e) => e.type), ['DeliveryFailed']);
  assert.is((events[0] as { data: { failureCode: string } }).data.failureCode, 'delivery_unknown');
});

settledRecovery('given a claim made with another transport (smtp) under the same instance, when the outbox answers, then its answer is none: the name counts too', () => {
  const events = decideRecovery(recoverWith([written(TO_INDEX)], { at: GRACE_END }), leftOpen([TO_INDEX], { transport: 'smtp' }), POLICY);
  assert.equal(events.map((e) => e.type), ['DeliveryFailed']);
});

settledRecovery.run();
