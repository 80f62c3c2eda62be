// Given/when/then specs of the email read model (projections/email-view.ts): what each event of
// an email's stream does to the list/detail document, that BCC recipients leave no trace, and
// that the stream-revision guard makes redelivered, stale and replayed events harmless.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { RecordedEmailEvent } from '../domain/email/events.ts';
import { applyToEmailView, type EmailView } from '../projections/email-view.ts';
import {
  BCC_INDEX, CC, CC_INDEX, T0, TO, TO_INDEX, accepted, after, attempted, claimed, deliveryFailed, outcome, recorded, suppressed, unknownEvent,
  type AnyEmailEvent,
} from './support/email-events.ts';

const test = suite('email view');

const fold = (events: RecordedEmailEvent[], view: EmailView | null = null): EmailView | null => events.reduce(applyToEmailView, view);
/** The document after `events` (revisions 0, 1, …), which must begin with an admission. */
function viewOf(...events: AnyEmailEvent[]): EmailView {
  const view = fold(recorded(events));
  assert.ok(view, 'the events should give a document');
  return view!;
}
/** Applies `event` as the stream's next one (revision = view.streamRevision + 1). */
const next = (view: EmailView, event: AnyEmailEvent): EmailView => applyToEmailView(view, recorded([event], 'em_test1', view.streamRevision + 1)[0])!;
const timeline = (view: EmailView) => view.events.map((e) => e.type);
const recipientStatuses = (view: EmailView) => view.recipients.map((r) => [r.address, r.status]);

const CLAIMED_AT = after(1_000);
const ATTEMPTED_AT = after(2_000);
const sentToAll = attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'sent')], { providerMessageId: 'prov-1' });

// ── admission ──────────────────────────────────────────────────────────────────

test('given nothing, when EmailAccepted, then a queued document with every field and one email.queued entry counting To and CC only', () => {
  const [event] = recorded([accepted()]);
  assert.equal(applyToEmailView(null, event), {
    _id: 'em_test1',
    projectId: 'prj_1',
    workspaceId: 'ws_1',
    apiKeyId: 'key_1',
    fromAddress: 'sender@example.test',
    fromDomain: 'example.test',
    toAddresses: [TO],
    to: ['Ann <ann@example.test>'],
    cc: ['cc@example.test'],
    replyTo: null,
    subject: 'Hello',
    status: 'queued',
    testMode: true,
    failureCode: null,
    createdAt: T0,
    sentAt: null,
    deliveredAt: null,
    providerMessageId: null,
    recipients: [{ address: TO, status: 'queued', occurredAt: T0 }, { address: CC, status: 'queued', occurredAt: T0 }],
    webhookDeliveries: [],
    metadata: { orderId: 42 },
    tags: { kind: 'welcome' },
    events: [{ id: 'evt-0', type: 'email.queued', occurredAt: T0, payload: { recipients: 2 } }],
    streamRevision: 0,
    doneRecipients: [],
  });
});

test('given nothing, when EmailSuppressed for a visible recipient, then a suppressed document naming that recipient and the reason', () => {
  const view = viewOf(suppressed([{ address: CC, reason: 'hard_bounce' }]));
  assert.is(view.status, 'suppressed');
  assert.equal(recipientStatuses(view), [[TO, 'suppressed'], [CC, 'suppressed']]);
  assert.equal(view.events, [{
    id: 'evt-0', type: 'email.suppressed', occurredAt: T0,
    payload: { reason: 'cc@example.test is suppressed (hard_bounce)', suppressedRecipients: [{ address: CC, reason: 'hard_bounce' }] },
  }]);
});

test('given nothing, when EmailSuppressed because of the BCC recipient, then the document never names that address', () => {
  const view = viewOf(suppressed([{ address: 'hidden@bcc.test', reason: 'complaint' }, { address: TO, reason: 'manual' }]));
  assert.equal(view.events[0].payload, { reason: 'a recipient is suppressed', suppressedRecipients: [{ address: TO, reason: 'manual' }] });
  assert.not.match(JSON.stringify(view), 'hidden@bcc.test');
});

// ── claim and outcomes ─────────────────────────────────────────────────────────

test('given a queued email, when DeliveryClaimed, then processing, recipients processing since the claim, and an email.processing entry', () => {
  const view = viewOf(accepted(), claimed({ transport: 'mx' }));
  assert.is(view.status, 'processing');
  assert.equal(view.recipients, [{ address: TO, status: 'processing', occurredAt: CLAIMED_AT }, { address: CC, status: 'processing', occurredAt: CLAIMED_AT }]);
  assert.equal(view.events.at(-1), { id: 'evt-1', type: 'email.processing', occurredAt: CLAIMED_AT, payload: { attempt: 1, transport: 'mx' } });
  assert.is(view.streamRevision, 1);
});

test('given a claimed email, when the relay accepts it, then sent: one email.sent entry for To and CC, sentAt and the provider message id', () => {
  const view = viewOf(accepted(), claimed(), sentToAll);
  assert.is(view.status, 'sent');
  assert.equal(recipientStatuses(view), [[TO, 'sent'], [CC, 'sent']]);
  assert.equal(view.recipients.map((r) => r.occurredAt), [ATTEMPTED_AT, ATTEMPTED_AT]);
  assert.is(view.sentAt, ATTEMPTED_AT);
  assert.is(view.deliveredAt, null);
  assert.is(view.providerMessageId, 'prov-1');
  assert.is(view.failureCode, null);
  assert.equal(view.events.at(-1), {
    id: 'evt-2:sent', type: 'email.sent', occurredAt: ATTEMPTED_AT,
    payload: {
      attempt: 1, transport: 'smtp',
      recipients: [
        { address: TO, smtpCode: 250, enhancedCode: '2.0.0', response: '250 sent' },
        { address: CC, smtpCode: 250, enhancedCode: '2.0.0', response: '250 sent' },
      ],
    },
  });
  assert.equal(timeline(view), ['email.queued', 'email.processing', 'email.sent']);
});

test('given a claimed email, when the recipient’s MX takes it, then delivered with sentAt and deliveredAt', () => {
  const view = viewOf(accepted(), claimed({ transport: 'mx' }), attempted([outcome(0, 'delivered'), outcome(1, 'delivered'), outcome(2, 'delivered')], { transport: 'mx' }));
  assert.is(view.status, 'delivered');
  assert.equal(timeline(view), ['email.queued', 'email.processing', 'email.delivered']);
  assert.is(view.sentAt, ATTEMPTED_AT);
  assert.is(view.deliveredAt, ATTEMPTED_AT);
});

test('given a sent email, when a later event delivers, then deliveredAt is its time and sentAt stays the first; later deliveries change neither', () => {
  const later = after(60_000);
  const view = viewOf(
    accepted(), claimed(),
    attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'delayed'), outcome(BCC_INDEX, 'delayed')], { nextAttemptAt: after(32_000) }),
    claimed({ attempt: 2, occurredAt: after(32_000) }),
    attempted([outcome(CC_INDEX, 'delivered'), outcome(BCC_INDEX, 'delivered')], { attempt: 2, occurredAt: later, providerMessageId: 'prov-2' }),
  );
  assert.is(view.sentAt, ATTEMPTED_AT);
  assert.is(view.deliveredAt, later);
  assert.is(view.providerMessageId, 'prov-2', 'the latest attempt’s provider id');
  const again = next(view, attempted([outcome(TO_INDEX, 'delivered')], { attempt: 3, occurredAt: after(120_000), providerMessageId: null }));
  assert.is(again.sentAt, ATTEMPTED_AT);
  assert.is(again.deliveredAt, later);
  assert.is(again.providerMessageId, 'prov-2', 'an attempt without one keeps the last');
});

test('given a claimed email over mx, when refused, then hard_bounced and an email.bounced entry with bounce_type hard', () => {
  const view = viewOf(accepted(), claimed({ transport: 'mx' }), attempted([outcome(0, 'hard_bounced', { smtpCode: 550 }), outcome(1, 'hard_bounced', { smtpCode: 550 })], { transport: 'mx' }));
  assert.is(view.status, 'hard_bounced');
  const entry = view.events.at(-1)!;
  assert.is(entry.type, 'email.bounced');
  assert.is(entry.payload.bounce_type, 'hard');
  assert.is(view.sentAt, null);
});

test('given a claimed email over mx, when deferred past the window, then soft_bounced and an email.bounced entry with bounce_type soft', () => {
  const view = viewOf(accepted(), claimed({ transport: 'mx' }), attempted([outcome(0, 'soft_bounced'), outcome(1, 'soft_bounced')], { transport: 'mx' }));
  assert.is(view.status, 'soft_bounced');
  assert.equal([view.events.at(-1)!.type, view.events.at(-1)!.payload.bounce_type], ['email.bounced', 'soft']);
});

test('given a claimed email, when deferred, then delayed and an email.delayed entry carrying nextAttemptAt', () => {
  const due = after(32_000);
  const view = viewOf(accepted(), claimed(), attempted([outcome(0, 'delayed', { smtpCode: 451 }), outcome(1, 'delayed', { smtpCode: 451 }), outcome(2, 'delayed')], { nextAttemptAt: due }));
  assert.is(view.status, 'delayed');
  assert.equal(recipientStatuses(view), [[TO, 'delayed'], [CC, 'delayed']]);
  assert.is(view.events.at(-1)!.type, 'email.delayed');
  assert.is(view.events.at(-1)!.payload.nextAttemptAt, due);
  assert.is(view.sentAt, null);
});

test('given a claimed email, when the relay refuses, then rejected, an email.rejected entry and the failure code', () => {
  const view = viewOf(accepted(), claimed(), attempted([outcome(0, 'rejected', { smtpCode: 554 }), outcome(1, 'rejected', { smtpCode: 554 })], { failureCode: 'provider_rejected' }));
  assert.is(view.status, 'rejected');
  assert.is(view.events.at(-1)!.type, 'email.rejected');
  assert.is(view.events.at(-1)!.payload.failureCode, 'provider_rejected');
  assert.is(view.failureCode, 'provider_rejected');
});

test('given a claimed email, when an attempt fails, then failed, an email.failed entry and the failure code', () => {
  const view = viewOf(accepted(), claimed(), attempted([outcome(0, 'failed'), outcome(1, 'failed'), outcome(2, 'failed')], { failureCode: 'delivery_unknown' }));
  assert.is(view.status, 'failed');
  assert.equal(timeline(view), ['email.queued', 'email.processing', 'email.failed']);
  assert.is(view.failureCode, 'delivery_unknown');
});

test('given a claimed email, when DeliveryFailed, then failed recipients with the reason as response, and the first failure code stays', () => {
  const view = viewOf(accepted(), claimed(), deliveryFailed([0, 1, 2], { failureCode: 'content_expired', reason: 'body destroyed' }));
  assert.is(view.status, 'failed');
  assert.is(view.failureCode, 'content_expired');
  assert.equal(view.events.at(-1), {
    id: 'evt-2:failed', type: 'email.failed', occurredAt: after(3_000),
    payload: {
      attempt: 1, failureCode: 'content_expired',
      recipients: [{ address: TO, smtpCode: null, enhancedCode: null, response: 'body destroyed' }, { address: CC, smtpCode: null, enhancedCode: null, response: 'body destroyed' }],
    },
  });
  assert.is(next(view, deliveryFailed([0], { failureCode: 'delivery_unknown' })).failureCode, 'content_expired');
});

test('given To delivered and CC hard bounced in one attempt, then hard_bounced, one entry per outcome, each recipient its own status', () => {
  const view = viewOf(accepted(), claimed({ transport: 'mx' }), attempted([outcome(0, 'delivered'), outcome(1, 'hard_bounced'), outcome(2, 'delivered')], { transport: 'mx' }));
  assert.is(view.status, 'hard_bounced');
  assert.equal(recipientStatuses(view), [[TO, 'delivered'], [CC, 'hard_bounced']]);
  assert.equal(view.events.slice(2).map((e) => [e.id, e.type, (e.payload.recipients as Array<{ address: string }>).map((r) => r.address)]), [
    ['evt-2:delivered', 'email.delivered', [TO]],
    ['evt-2:hard_bounced', 'email.bounced', [CC]],
  ]);
  assert.is(view.deliveredAt, ATTEMPTED_AT);
});

test('given a delayed email, when the retry is claimed and then accepted, then processing again and then sent: the latest attempt stands', () => {
  const delayed = viewOf(accepted(), claimed(), attempted([outcome(0, 'delayed'), outcome(1, 'delayed'), outcome(2, 'delayed')], { nextAttemptAt: after(32_000) }));
  const retry = next(delayed, claimed({ attempt: 2, occurredAt: after(32_000) }));
  assert.equal(recipientStatuses(retry), [[TO, 'processing'], [CC, 'processing']]);
  assert.is(retry.status, 'processing');
  const sent = next(retry, attempted([outcome(0, 'sent'), outcome(1, 'sent'), outcome(2, 'sent')], { attempt: 2, occurredAt: after(33_000) }));
  assert.equal(recipientStatuses(sent), [[TO, 'sent'], [CC, 'sent']]);
  assert.equal(sent.recipients.map((r) => r.occurredAt), [after(33_000), after(33_000)]);
  assert.is(sent.status, 'sent');
  assert.is(sent.sentAt, after(33_000));
  assert.equal(timeline(sent), ['email.queued', 'email.processing', 'email.delayed', 'email.processing', 'email.sent']);
});

test('given a recipient already sent, when a retry is claimed for the others, then the sent one and its occurredAt stay', () => {
  const given = viewOf(accepted(), claimed(), attempted([outcome(0, 'sent'), outcome(1, 'delayed'), outcome(2, 'delayed')], { nextAttemptAt: after(32_000) }));
  const retry = next(given, claimed({ attempt: 2, occurredAt: after(32_000) }));
  assert.equal(retry.recipients, [given.recipients[0], { address: CC, status: 'processing', occurredAt: after(32_000) }]);
  assert.is(retry.status, 'sent', 'the email status is the highest of its recipients’');
});

// ── BCC ────────────────────────────────────────────────────────────────────────

test('given a sent email, when outcomes of the BCC recipient alone arrive, then no timeline entry, no status change and no address:null anywhere', () => {
  const given = viewOf(accepted(), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'delayed')], { nextAttemptAt: after(32_000) }));
  const bcc = [
    attempted([outcome(BCC_INDEX, 'hard_bounced', { smtpCode: 550, response: '550 no such user hidden@bcc.test' })], { attempt: 2, transport: 'mx' }),
    attempted([outcome(BCC_INDEX, 'delivered')], { attempt: 3, transport: 'mx' }),
    deliveryFailed([BCC_INDEX], { attempt: 4, failureCode: 'delivery_unknown' }),
  ];
  for (const event of bcc) {
    const view = next(given, event);
    assert.equal(view.events, given.events, event.type);
    assert.equal(view.recipients, given.recipients, event.type);
    assert.is(view.status, 'sent', event.type);
    assert.is(view.deliveredAt, null, event.type);
    const json = JSON.stringify(view);
    assert.not.match(json, '"address":null', event.type);
    assert.not.match(json, 'hidden@bcc.test', event.type);
    assert.not.match(json, 'no such user', event.type);
  }
});

// Skipped: fails today. `failureCode: view.failureCode ?? failureCode` takes the event's code
// even when only the BCC recipient failed, so a sent email shows a failure code.
test('given a sent email, when the BCC recipient alone fails, then no failure code appears', () => {
  const given = viewOf(accepted(), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'delayed')], { nextAttemptAt: after(32_000) }));
  assert.is(next(given, deliveryFailed([BCC_INDEX], { attempt: 2 })).failureCode, null);
  assert.is(next(given, attempted([outcome(BCC_INDEX, 'rejected')], { attempt: 2, failureCode: 'provider_rejected' })).failureCode, null);
});

test('given a claimed email, when the BCC recipient alone was sent, then sentAt stays unset', () => {
  const view = viewOf(accepted(), claimed(), attempted([outcome(TO_INDEX, 'delayed'), outcome(CC_INDEX, 'delayed'), outcome(BCC_INDEX, 'sent')], { nextAttemptAt: after(32_000) }));
  assert.is(view.sentAt, null);
  assert.equal(timeline(view), ['email.queued', 'email.processing', 'email.delayed']);
  assert.equal((view.events.at(-1)!.payload.recipients as unknown[]).length, 2);
});

// ── the revision guard ─────────────────────────────────────────────────────────

test('given a document, when the same event (same revision) is applied again, then the same object comes back and the timeline is not doubled', () => {
  const events = recorded([accepted(), claimed(), sentToAll]);
  const view = fold(events)!;
  for (const event of events) assert.is(applyToEmailView(view, event), view, `revision ${event.revision}`);
  assert.equal(timeline(fold(events, view)!), ['email.queued', 'email.processing', 'email.sent']);
});

test('given a document at revision 2, when an older event arrives out of order, then it is ignored', () => {
  const [acceptedEvent, claim, attempt] = recorded([accepted(), claimed(), sentToAll]);
  const view = fold([acceptedEvent, claim, attempt])!;
  assert.is(applyToEmailView(view, claim), view);
  assert.is(applyToEmailView(view, acceptedEvent), view, 'a redelivered admission does not reset the document');
  assert.is(view.status, 'sent');
});

test('given a document, when a later event of an unknown type arrives, then the document is unchanged, streamRevision included (the live projector never receives it)', () => {
  const view = viewOf(accepted(), claimed());
  const [unknown] = recorded([unknownEvent('EmailOpened')], 'em_test1', 2);
  assert.is(unknown.type, 'UnrecognizedEvent');
  assert.is(applyToEmailView(view, unknown), view);
  // The next known event, after it, applies as usual.
  const [next] = recorded([attempted([outcome(0, 'sent'), outcome(1, 'sent')])], 'em_test1', 3);
  assert.is(applyToEmailView(view, next)!.streamRevision, 3);
});

test('given no document, when a lifecycle event arrives before its admission, then still no document', () => {
  const [claim] = recorded([claimed()], 'em_test1', 1);
  assert.is(applyToEmailView(null, claim), null);
});

test('replay: the same events applied to fresh documents, or with every event delivered twice, give equal documents', () => {
  const events = recorded([
    accepted(), claimed(),
    attempted([outcome(0, 'sent'), outcome(1, 'delayed'), outcome(2, 'delayed')], { nextAttemptAt: after(32_000) }),
    unknownEvent(),
    claimed({ attempt: 2, occurredAt: after(32_000) }),
    deliveryFailed([1, 2], { attempt: 2, occurredAt: after(40_000) }),
  ]);
  const first = fold(events);
  assert.equal(fold(events), first);
  assert.equal(fold(events.flatMap((e) => [e, e])), first);
  assert.equal(fold([...events, ...events]), first);
  assert.is(first!.streamRevision, 5);
  assert.is(first!.status, 'failed');
});

// Pins: the read model keeps in step with the deciders (domain/email/state.ts) on who is still
// being sent to. A recipient accepted (sent) and then reported delayed shows delayed, and a
// later claim (for a deferred co-recipient) leaves it delayed rather than processing.
const delayReported = (index: number, at: string): AnyEmailEvent => ({
  type: 'RecipientReported',
  data: {
    reportId: `rep-${index}`, recipientIndex: index, address: index === TO_INDEX ? TO : index === CC_INDEX ? CC : null, outcome: 'delayed',
    format: 'dsn', status: '4.4.1', diagnosticCode: null, reason: 'delayed downstream', complaintType: null, occurredAt: after(3_000),
  },
});

test('given a sent recipient later reported delayed, when a retry for a deferred co-recipient is claimed, then it stays delayed (not sent to again)', () => {
  const view = viewOf(
    accepted(), claimed(),
    attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'delayed'), outcome(BCC_INDEX, 'sent')], { nextAttemptAt: after(30_000) }),
    delayReported(TO_INDEX, after(3_000)),
    claimed({ attempt: 2, occurredAt: after(30_000) }),
  );
  assert.equal(recipientStatuses(view), [[TO, 'delayed'], [CC, 'processing']]);
  assert.equal(view.doneRecipients, [TO_INDEX]);
  assert.equal(timeline(view), ['email.queued', 'email.processing', 'email.sent', 'email.delayed', 'email.delayed', 'email.processing']);
});

// Pins: BCC activity leaves no trace. A claim adds a timeline entry only when it moves a visible
// (To, CC) recipient to processing, and the email's providerMessageId is a visible recipient's
// queue id, never a BCC one's.
test('given visible recipients all sent, when a retry is claimed for a deferred BCC recipient alone, then no timeline entry', () => {
  const sent = viewOf(
    accepted(), claimed(),
    attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'delayed')], { nextAttemptAt: after(30_000) }),
  );
  const retried = next(sent, claimed({ attempt: 2, occurredAt: after(30_000) }));
  assert.equal(timeline(retried), ['email.queued', 'email.processing', 'email.sent']);
  assert.is(retried.status, 'sent');
  assert.is(retried.streamRevision, sent.streamRevision + 1);
});

test('given an attempt in which only the BCC recipient was accepted, then providerMessageId stays null; a visible one\'s queue id shows', () => {
  const bccOnly = viewOf(
    accepted(), claimed(),
    attempted([outcome(TO_INDEX, 'delayed'), outcome(CC_INDEX, 'delayed'), outcome(BCC_INDEX, 'sent', { providerMessageId: 'QID-BCC' })], { providerMessageId: 'QID-BCC', nextAttemptAt: after(30_000) }),
  );
  assert.is(bccOnly.providerMessageId, null);
  const visible = next(next(bccOnly, claimed({ attempt: 2, occurredAt: after(30_000) })),
    attempted([outcome(TO_INDEX, 'sent', { providerMessageId: 'QID-TO' }), outcome(CC_INDEX, 'sent', { providerMessageId: 'QID-CC' })], { attempt: 2, providerMessageId: 'QID-TO', occurredAt: after(31_000) }));
  assert.is(visible.providerMessageId, 'QID-TO');
  // Events from before per-recipient queue ids: the attempt's one stands.
  assert.is(viewOf(accepted(), claimed(), sentToAll).providerMessageId, 'prov-1');
});

test.run();
