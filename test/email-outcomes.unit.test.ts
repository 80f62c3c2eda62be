// Given/when/then tests of the outcome model (domain/email/outcomes.ts) on its own: how a
// recipient's status moves, the detail fields, the grouping and its reason, and what is hidden.
// test/outcomes-agreement.unit.test.ts checks that the timeline and the webhooks follow it alike.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { detailOf, outcomesOf, shownSuppression, statusAfter, statusOnClaim } from '../domain/email/outcomes.ts';
import type { Status } from '../domain/email/status.ts';
import { BCC_INDEX, CC, CC_INDEX, TO, TO_INDEX, attempted, claimed, deliveryFailed, outcome, recorded, suppressed } from './support/email-events.ts';
import type { AnyEmailEvent } from './support/email-events.ts';

const test = suite('outcome model');
const one = (event: AnyEmailEvent) => outcomesOf(recorded([event], 'em_test1', 3)[0]);
const report = (data: Record<string, unknown>): AnyEmailEvent => ({
  type: 'RecipientReported',
  data: {
    reportId: 'r1', recipientIndex: TO_INDEX, address: TO, outcome: 'delayed', format: 'dsn', status: '4.4.1', diagnosticCode: null,
    reason: 'timed out', complaintType: null, occurredAt: '2026-11-01T10:05:00.000Z', ...data,
  },
});

test('statuses: the sender\'s outcomes replace, reports only move up, a claim makes the unfinished processing', () => {
  assert.is(statusAfter('delayed', { status: 'sent', source: 'attempt' }), 'sent');
  assert.is(statusAfter('delivered', { status: 'delayed', source: 'attempt' }), 'delayed', 'a later attempt stands');
  assert.is(statusAfter('delivered', { status: 'delayed', source: 'report' }), 'delivered', 'a report never moves down');
  assert.is(statusAfter('sent', { status: 'delivered', source: 'report' }), 'delivered');
  assert.is(statusOnClaim('queued'), 'processing');
  assert.is(statusOnClaim('delayed'), 'processing');
  assert.is(statusOnClaim('sent'), 'sent');
  assert.is(statusOnClaim('complained'), 'complained');
});

test('given a recipient the sender recorded failed (its fate unknown, or never taken), when a report about its copy comes, then the report replaces failed, whatever it says', () => {
  for (const reported of ['delivered', 'delayed', 'soft_bounced', 'hard_bounced', 'complained'] as const) {
    assert.is(statusAfter('failed', { status: reported, source: 'report' }), reported, reported);
  }
  assert.is(statusAfter('soft_bounced', { status: 'delivered', source: 'report' }), 'soft_bounced', 'a soft bounce, which reports write too, stays in the order');
  assert.is(statusAfter('rejected', { status: 'delivered', source: 'report' }), 'rejected');
  assert.is(statusAfter('failed', { status: 'failed', source: 'attempt' }), 'failed');
});

test('given a delay reported first, when the sender\'s outcome that it followed is recorded (reportedFirst), then the status is what the report makes of that outcome', () => {
  const first = (status: Status) => statusAfter('delayed', { status, source: 'attempt', reportedFirst: true });
  assert.is(first('sent'), 'delayed', 'the 250 came before the delay reported about its copy');
  assert.is(first('delivered'), 'delivered');
  assert.is(first('failed'), 'delayed', 'as a reported delay after failed');
  assert.is(first('hard_bounced'), 'hard_bounced');
  assert.is(statusAfter('delayed', { status: 'sent', source: 'attempt', reportedFirst: false }), 'sent', 'unmarked, the sender\'s outcome replaces');
  // The same facts recorded the other way round give the same status.
  for (const status of ['sent', 'delivered', 'failed', 'hard_bounced', 'rejected', 'soft_bounced'] as const) {
    assert.is(first(status), statusAfter(statusAfter('processing', { status, source: 'attempt' }), { status: 'delayed', source: 'report' }), status);
  }
});

test('given events marking reportedFirst, when their outcomes are read, then each recipient says whether it was; reports and older events never are', () => {
  const marked = one(attempted([outcome(TO_INDEX, 'sent', { reportedFirst: true }), outcome(CC_INDEX, 'sent')]));
  assert.equal(marked.recipients.map((r) => [r.index, r.reportedFirst]), [[TO_INDEX, true], [CC_INDEX, false]]);
  const failed = deliveryFailed([TO_INDEX, CC_INDEX]);
  failed.data.recipients[1] = { ...failed.data.recipients[1], reportedFirst: true };
  assert.equal(one(failed).recipients.map((r) => [r.index, r.reportedFirst]), [[TO_INDEX, false], [CC_INDEX, true]]);
  assert.equal(one(report({})).recipients.map((r) => r.reportedFirst), [false]);
});

test('details: bounce type, delay origin, complaint type (abuse when the report named none), nothing else', () => {
  assert.equal(detailOf('hard_bounced', 'attempt'), { bounce_type: 'hard' });
  assert.equal(detailOf('soft_bounced', 'report'), { bounce_type: 'soft' });
  assert.equal(detailOf('delayed', 'attempt'), { delay_type: 'retry' });
  assert.equal(detailOf('delayed', 'report'), { delay_type: 'reported' });
  assert.equal(detailOf('complained', 'report', 'fraud'), { complaint_type: 'fraud' });
  assert.equal(detailOf('complained', 'report'), { complaint_type: 'abuse' });
  assert.equal(detailOf('complained', 'report', null), { complaint_type: 'abuse' });
  for (const status of ['sent', 'delivered', 'failed', 'rejected'] as const) assert.equal(detailOf(status, 'attempt'), {}, status);
});

test('an attempt: one group per status in the order named; BCC outcomes recorded but never shown; reasons distinct, failure code first', () => {
  const outcomes = one(attempted([
    outcome(TO_INDEX, 'rejected', { response: '554 no' }),
    outcome(BCC_INDEX, 'delayed', { response: '451 later' }),
    outcome(CC_INDEX, 'rejected', { response: '554 no' }),
  ], { failureCode: 'provider_rejected', nextAttemptAt: '2026-11-01T10:10:00.000Z' }));
  assert.equal(outcomes.recipients.map((r) => [r.index, r.address, r.status, r.source]), [[0, TO, 'rejected', 'attempt'], [2, null, 'delayed', 'attempt'], [1, CC, 'rejected', 'attempt']]);
  assert.equal(outcomes.groups.map((g) => [g.type, g.status, g.shown.map((o) => o.address), g.reason]), [
    ['email.rejected', 'rejected', [TO, CC], 'provider_rejected; 554 no'],
    ['email.delayed', 'delayed', [], null],
  ]);
  assert.is(outcomes.shownFailureCode, 'provider_rejected');
  assert.is(outcomes.shownNextAttemptAt, null, 'only the BCC recipient waits for the retry');
  assert.equal(outcomes.groups[0].shown[0].shownAs, { address: TO, smtpCode: 250, enhancedCode: '2.0.0', response: '554 no' });
});

test('an attempt with a shown delay among others: the next attempt shows; a failure of the BCC alone hides its code', () => {
  const mixed = one(attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'delayed')], { nextAttemptAt: '2026-11-01T10:10:00.000Z' }));
  assert.is(mixed.shownNextAttemptAt, '2026-11-01T10:10:00.000Z');
  assert.is(mixed.groups.find((g) => g.status === 'sent')!.reason, '250 sent');
  const hidden = one(attempted([outcome(TO_INDEX, 'sent'), outcome(BCC_INDEX, 'failed')], { failureCode: 'provider_unavailable' }));
  assert.is(hidden.shownFailureCode, null);
  assert.is(hidden.groups.find((g) => g.status === 'failed')!.reason, 'provider_unavailable', 'the group still says its failure code');
  assert.is(hidden.groups.find((g) => g.status === 'sent')!.reason, '250 sent', 'no failure code for a success');
  const long = one(attempted([outcome(TO_INDEX, 'rejected', { response: 'x'.repeat(1500) })], { failureCode: 'provider_rejected' }));
  assert.is(long.groups[0].reason!.length, 1000, 'reasons are cut at 1,000 characters');
  const silent = one(attempted([outcome(TO_INDEX, 'sent', { response: '' })]));
  assert.is(silent.groups[0].reason, null, 'no reason at all is null');
});

test('given an attempt whose recipients failed for different reasons, when its outcomes are read, then each group and the email show the codes of their own visible recipients, never a BCC one\'s', () => {
  const outcomes = one(attempted([
    outcome(TO_INDEX, 'rejected', { response: '554 refused', failureCode: 'provider_rejected' }),
    outcome(BCC_INDEX, 'failed', { response: 'connection lost after the dot', failureCode: 'delivery_unknown' }),
    outcome(CC_INDEX, 'failed', { response: '451 later', failureCode: 'provider_unavailable' }),
  ], { failureCode: 'delivery_unknown' }));
  assert.equal(outcomes.groups.map((g) => [g.status, g.failureCode, g.reason]), [
    ['rejected', 'provider_rejected', 'provider_rejected; 554 refused'],
    ['failed', 'provider_unavailable', 'provider_unavailable; 451 later'],
  ]);
  assert.is(outcomes.shownFailureCode, 'provider_rejected', 'the first visible recipient that failed or was rejected');
  const bccUnknown = one(attempted([outcome(TO_INDEX, 'sent'), outcome(BCC_INDEX, 'failed', { failureCode: 'delivery_unknown' })], { failureCode: 'delivery_unknown' }));
  assert.is(bccUnknown.shownFailureCode, null, 'a BCC failure alone shows no code on the email');
  assert.is(bccUnknown.groups.find((g) => g.status === 'sent')!.failureCode, null);
  assert.is(bccUnknown.groups.find((g) => g.status === 'failed')!.failureCode, 'delivery_unknown', 'a group of BCC recipients alone still says its own code');
  const mixed = one(attempted([
    outcome(TO_INDEX, 'failed', { response: 'lost', failureCode: 'delivery_unknown' }),
    outcome(CC_INDEX, 'failed', { response: 'later', failureCode: 'provider_unavailable' }),
  ]));
  assert.is(mixed.groups[0].reason, 'delivery_unknown; provider_unavailable; lost; later', 'distinct codes first, in the order named');
  assert.is(mixed.groups[0].failureCode, 'delivery_unknown');
});

test('given an attempt recorded before recipients had their own code, when its outcomes are read, then the attempt\'s code stands for its failed and rejected ones', () => {
  const old = one(attempted([outcome(TO_INDEX, 'rejected', { response: '554 no' }), outcome(CC_INDEX, 'sent')], { failureCode: 'provider_rejected' }));
  assert.equal(old.recipients.map((r) => r.failureCode), ['provider_rejected', null]);
  assert.is(old.shownFailureCode, 'provider_rejected');
  assert.is(old.groups[0].reason, 'provider_rejected; 554 no');
});

test('a failure: every pending recipient failed with the failure\'s reason; statuses with no event name make no group', () => {
  const failed = one(deliveryFailed([TO_INDEX, BCC_INDEX], { failureCode: 'delivery_unknown', reason: 'claim left open' }));
  assert.equal(failed.groups.map((g) => [g.status, g.shown.map((o) => o.address), g.reason]), [['failed', [TO], 'delivery_unknown; claim left open']]);
  assert.equal(failed.groups[0].shown[0].shownAs, { address: TO, smtpCode: null, enhancedCode: null, response: 'claim left open' });
  assert.is(failed.shownFailureCode, 'delivery_unknown');
  const processing = one(attempted([outcome(TO_INDEX, 'processing')]));
  assert.equal(processing.groups, [], 'processing is no outcome event');
});

test('a report: one outcome from outside, its status and text as the reason; undetermined ones record nothing', () => {
  const delayed = one(report({}));
  assert.equal(delayed.recipients.map((r) => [r.status, r.source, r.reason]), [['delayed', 'report', '4.4.1 timed out']]);
  assert.equal(delayed.groups.map((g) => [g.type, g.detail, g.reason]), [['email.delayed', { delay_type: 'reported' }, '4.4.1 timed out']]);
  assert.equal(delayed.groups[0].shown[0].shownAs, { address: TO, status: '4.4.1', diagnosticCode: null });
  assert.equal(one(report({ outcome: 'complained', status: null, complaintType: 'virus', reason: 'complaint' })).groups[0].detail, { complaint_type: 'virus' });
  assert.is(one(report({ status: null, reason: 'late' })).groups[0].reason, 'late');
  assert.equal(one(report({ outcome: 'undetermined' })), { recipients: [], groups: [], shownFailureCode: null, shownNextAttemptAt: null });
  assert.equal(one(claimed()).groups, []);
});

test('a suppression shows its reason only when it names a To or CC recipient first, and names only those', () => {
  const visible = suppressed([{ address: CC, reason: 'complaint' }, { address: 'hidden@bcc.test', reason: 'manual' }]);
  assert.equal(shownSuppression(visible.data), { reason: 'cc@example.test is suppressed (complaint)', recipients: [{ address: CC, reason: 'complaint' }] });
  const hidden = suppressed([{ address: 'hidden@bcc.test', reason: 'manual' }, { address: TO, reason: 'hard_bounce' }]);
  assert.equal(shownSuppression(hidden.data), { reason: 'a recipient is suppressed', recipients: [{ address: TO, reason: 'hard_bounce' }] });
});

test.run();
