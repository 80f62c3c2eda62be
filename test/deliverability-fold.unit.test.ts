// Given/when/then specs of the deliverability read model's fold (projections/deliverability.ts)
// for failure replies: each failure outcome a recipient reaches keeps the reply of the event that
// first brought it there, and is counted (countsOf) with that reply at that outcome's instant,
// whatever failed later; a document written before replies were kept per outcome (one `reply`,
// its latest failure's) is counted with that reply where it holds no reply of the outcome's own.
// Then the outcomes counted where the status rules have a report supersede the sender's
// `failed`, or keep a delay reported before the sender's outcome that it followed (reportedFirst).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { RecordedEmailEvent } from '../domain/email/events.ts';
import { applyToDeliverability, countsOf, type DeliverabilityEmail } from '../projections/deliverability.ts';
import { TO, after, accepted, attempted, claimed, deliveryFailed, outcome, recorded } from './support/email-events.ts';

const test = suite('deliverability fold: failure replies');

const fold = (events: RecordedEmailEvent[], email: DeliverabilityEmail | null = null) => events.reduce(applyToDeliverability, email);
/** The document after `events` (revisions 0, 1, …), which must begin with an admission. */
function documentOf(...events: Array<{ type: string; data: object }>): DeliverabilityEmail {
  const email = fold(recorded(events));
  assert.ok(email, 'the events should give a document');
  return email!;
}
/** Applies `event` as the stream's revision `revision`, to the document as a store gives it back (as the live processor does). */
const next = (email: DeliverabilityEmail, revision: number, event: { type: string; data: object }) =>
  fold(recorded([event], 'em_test1', revision), JSON.parse(JSON.stringify(email)))!;
/** Recipient 0's failures as counted: [outcome, at, reply code]. */
const failuresCounted = (email: Pick<DeliverabilityEmail, 'recipients'>) => countsOf({ recipients: email.recipients.slice(0, 1) }).contributions
  .filter((c) => c.reply !== null)
  .map((c) => [c.outcome, c.at, c.reply!.code]);

const DAY3 = after(2 * 86_400_000);
const unknownOutcome = deliveryFailed([0, 1], { failureCode: 'delivery_unknown', reason: 'the sender stopped during the transaction', occurredAt: after(3_000) });
const dsn = (status: string, outcomeName = 'hard_bounced', occurredAt = DAY3) => ({
  type: 'RecipientReported',
  data: {
    reportId: `dsn-${status}`, recipientIndex: 0, address: TO, outcome: outcomeName, format: 'dsn', status,
    diagnosticCode: `smtp; 550 ${status} user unknown`, reason: 'user unknown', complaintType: null, occurredAt,
  },
});

test('given an accepted email, when its delivery fails, then the failure keeps its reply, and nothing of the older form', () => {
  const email = documentOf(accepted(), claimed(), unknownOutcome);
  assert.equal(email.recipients[0].replies, { failed: { code: 'delivery_unknown', text: 'the sender stopped during the transaction' } });
  assert.not.ok('reply' in email.recipients[0]);
  assert.equal(failuresCounted(email), [['failed', after(3_000), 'delivery_unknown']]);
});

test('given a failure whose reply names addresses (quoted, URL-encoded, in brackets), then the reply kept holds none of them, on one line', () => {
  const reply = 'user "john doe"@example.org unknown;\n see https://help.example.net/?rcpt=ann%40example.org or <bob@example.org>';
  const email = documentOf(accepted(), claimed(), deliveryFailed([0, 1], { failureCode: 'delivery_unknown', reason: reply, occurredAt: after(3_000) }));
  assert.is(email.recipients[0].replies?.failed?.text, 'user <address> unknown; see https://help.example.net/?rcpt=<address> or <address>');
});

test('given a failed recipient, when a DSN hard-bounces it two days later, then each failure counts its own reply at its own instant', () => {
  const failed = documentOf(accepted(), claimed(), unknownOutcome);
  const bounced = next(failed, 3, dsn('5.1.1'));
  assert.equal(bounced.recipients[0].replies, {
    failed: { code: 'delivery_unknown', text: 'the sender stopped during the transaction' },
    hard_bounced: { code: '5.1.1', text: 'smtp; 550 5.1.1 user unknown' },
  });
  assert.equal(failuresCounted(bounced), [['hard_bounced', DAY3, '5.1.1'], ['failed', after(3_000), 'delivery_unknown']]);
  // The CC, not named by the report, keeps its own.
  assert.equal(bounced.recipients[1].replies, failed.recipients[1].replies);
});

test('given a soft bounce, when the recipient is delayed and soft-bounced again with another reply, then the first soft bounce\'s reply is the one counted, as its instant is', () => {
  const first = outcome(0, 'soft_bounced', { smtpCode: 452, enhancedCode: '4.2.2', response: '452 4.2.2 mailbox full' });
  const second = outcome(0, 'soft_bounced', { smtpCode: 451, enhancedCode: '4.3.0', response: '451 4.3.0 try later' });
  const email = documentOf(
    accepted(), claimed(),
    attempted([first], { occurredAt: after(2_000) }),
    attempted([outcome(0, 'delayed', { smtpCode: 421, enhancedCode: '4.7.0', response: '421 4.7.0 slow down' })], { occurredAt: after(60_000) }),
    attempted([second], { occurredAt: after(120_000) }),
  );
  assert.is(email.recipients[0].reached.soft_bounced, after(2_000));
  assert.is(email.recipients[0].replies?.soft_bounced?.code, '452 4.2.2');
  assert.equal(failuresCounted(email), [['soft_bounced', after(2_000), '452 4.2.2']]);
});

test('given a document of the older form (one reply, its latest failure\'s), then its failures count that reply; when a new failure comes, then it counts its own', () => {
  const { recipients, ...rest } = documentOf(accepted(), claimed(), unknownOutcome);
  const older: DeliverabilityEmail = { ...rest, recipients: recipients.map(({ replies, ...r }) => ({ ...r, reply: { code: 'delivery_unknown', text: 'as stored' } })) };
  assert.equal(failuresCounted(older), [['failed', after(3_000), 'delivery_unknown']]);
  const bounced = next(older, 3, dsn('5.1.1'));
  assert.equal(failuresCounted(bounced), [['hard_bounced', DAY3, '5.1.1'], ['failed', after(3_000), 'delivery_unknown']]);
  assert.equal(bounced.recipients[0].reply, { code: 'delivery_unknown', text: 'as stored' }, 'kept for the outcomes it stands for');
});

test('given any history, then folding it at once (a rebuild) and an event at a time through a store (live) give the same document', () => {
  const events = [accepted(), claimed(), attempted([outcome(0, 'soft_bounced', { smtpCode: 452, enhancedCode: '4.2.2', response: '452 mailbox full' }), outcome(1, 'sent')]), unknownOutcome, dsn('5.1.1')];
  const rebuilt = documentOf(...events);
  let live = documentOf(events[0]);
  events.forEach((event, revision) => {
    if (revision > 0) live = next(live, revision, event);
  });
  assert.equal(live, rebuilt);
  assert.equal(JSON.parse(JSON.stringify(rebuilt)), rebuilt, 'nothing a store would drop');
});

test.run();

// ── outcomes the status rules keep ─────────────────────────────────────────────

const rules = suite('deliverability fold: a report over failed, a delay reported first');

/** Recipient 0's outcomes as counted: [outcome, at]. */
const counted = (email: Pick<DeliverabilityEmail, 'recipients'>) => countsOf({ recipients: email.recipients.slice(0, 1) }).contributions.map((c) => [c.outcome, c.at]);

rules('given a recipient failed with delivery_unknown, when a DSN says it was delivered, then it counts delivered (and sent) at the report\'s instant, its failure still counted', () => {
  const delivered = next(documentOf(accepted(), claimed(), unknownOutcome), 3, dsn('2.0.0', 'delivered'));
  assert.is(delivered.recipients[0].status, 'delivered');
  assert.equal(counted(delivered), [['accepted', after(0)], ['sent', DAY3], ['delivered', DAY3], ['failed', after(3_000)]]);
});

rules('given a delay reported before the attempt\'s outcome it followed, when that outcome (sent, reportedFirst) is applied, then it counts sent at its instant and the delay stands', () => {
  const email = documentOf(accepted(), claimed(), dsn('4.4.7', 'delayed', after(1_800)), attempted([outcome(0, 'sent', { reportedFirst: true }), outcome(1, 'sent')], { occurredAt: after(2_000) }));
  assert.is(email.recipients[0].status, 'delayed');
  assert.equal(counted(email), [['accepted', after(0)], ['sent', after(2_000)], ['delayed', after(1_800)]]);
  const otherWay = documentOf(accepted(), claimed(), attempted([outcome(0, 'sent'), outcome(1, 'sent')], { occurredAt: after(2_000) }), dsn('4.4.7', 'delayed', after(1_800)));
  assert.equal(email.recipients[0], otherWay.recipients[0], 'the same as the two recorded the other way round');
});

rules.run();
