// The sender's schedule as an email's state asks for it (desiredWorkItem,
// apps/services/delivery/work-items.ts): an item stays only while a step has something to do. A
// delivery with nobody left to send to has no attempt or takeover due, whatever the state's
// `finished` says, so no step is run again and again for nothing; a claim whose transactions
// began still owes its recovery. Recipients of the default message: 0 To, 1 CC, 2 BCC.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { desiredWorkItem } from '../apps/services/delivery/work-items.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import type { RecipientReported } from '../domain/email/events.ts';
import { foldEmail, type EmailState } from '../domain/email/state.ts';
import { BCC_INDEX, CC_INDEX, TO, TO_INDEX, accepted, after, attempted, claimed, outcome } from './support/email-events.ts';

const test = suite('delivery work items');

const origin = { correlationId: 'corr-1', causationId: 'evt-0' };
const desired = (state: EmailState) => desiredWorkItem(state, state.revision, origin, DELIVERY_POLICY);

const RETRY_AT = after(30_000);
/** Attempt 1: To deferred (its retry at RETRY_AT), CC and BCC accepted. */
const toDeferred = () => [
  accepted(),
  claimed(),
  attempted([outcome(TO_INDEX, 'delayed', { smtpCode: 451 }), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'sent')], { nextAttemptAt: RETRY_AT }),
];
const bounced = (at: string): RecipientReported => ({
  type: 'RecipientReported',
  data: {
    reportId: 'rep-1', recipientIndex: TO_INDEX, address: TO, outcome: 'hard_bounced', format: 'dsn', status: '5.1.1',
    diagnosticCode: '550 5.1.1 User unknown', reason: 'user unknown', complaintType: null, occurredAt: at,
  },
});

test('given a recipient waiting for its retry, then the item is the next attempt, due at the retry', () => {
  const item = desired(foldEmail(toDeferred()));
  assert.is(item?.step, 'attempt');
  assert.is(item?.attempt, 2);
  assert.is(item?.dueAt, RETRY_AT);
});

test('given that recipient then reported bounced, then there is no item', () => {
  assert.is(desired(foldEmail([...toDeferred(), bounced(after(5_000))])), null);
});

test('given nobody pending and no claim open, even in a state that does not say finished, then there is no item', () => {
  const state = foldEmail([...toDeferred(), bounced(after(5_000))]);
  const unfinished: EmailState = { ...state, delivery: { ...state.delivery, finished: false, nextAttemptAt: RETRY_AT } };
  assert.is(desired(unfinished), null);
});

test('given the retry claimed and none of its transactions begun, when a report makes its recipient final, then there is no item (nothing to send, nothing unknown)', () => {
  const state = foldEmail([...toDeferred(), claimed({ attempt: 2, occurredAt: RETRY_AT }), bounced(after(1_000, RETRY_AT))]);
  assert.ok(state.delivery.openClaim, 'the claim is open');
  assert.is(desired(state), null);
});

test('given the retry claimed and its transaction begun, when a report makes its recipient final, then the recovery is still due', () => {
  const state = foldEmail([
    ...toDeferred(),
    claimed({ attempt: 2, occurredAt: RETRY_AT }),
    { type: 'DeliveryTransactionStarted', data: { attempt: 2, recipients: [TO_INDEX], occurredAt: after(500, RETRY_AT) } },
    bounced(after(1_000, RETRY_AT)),
  ]);
  const item = desired(state);
  assert.is(item?.step, 'recover');
  assert.is(item?.attempt, 2);
});

test.run();
