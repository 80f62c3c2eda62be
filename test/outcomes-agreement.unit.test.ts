// The timeline (projections/email-view.ts) and the webhooks (domain/webhooks/events.ts) show
// the same outcomes: generated histories of emails (made by the real deciders: claims, attempts
// over a relay and over MX with every kind of result, retries, failures, reports of every
// outcome in any order (delays reported before the attempt's outcome among them), delays after
// delivery, repeated reports, BCC recipients, addresses listed twice (one transaction, so one
// report about each listing), suppressions) are fed event by event, some events twice (a redelivery), to both,
// and every webhook event must match a timeline entry (its type, recipients, detail fields and
// failure code) or concern BCC recipients alone, with the status and provider id the document has.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { decideEmail, type EmailCommand } from '../domain/email/decider.ts';
import { DELIVERY_POLICY, scaleDeliveryPolicy, type TransportResult } from '../domain/email/delivery.ts';
import type { AdmittedMessage, EmailEvent, RecordedEmailEvent, ReportedOutcome } from '../domain/email/events.ts';
import { evolveEmail, initialEmailState, pendingRecipients, type EmailState } from '../domain/email/state.ts';
import { upcastEmailEvent } from '../domain/email/upcast.ts';
import { webhookEventsOf, type WebhookEvent } from '../domain/webhooks/events.ts';
import { FOLDED_ENTRIES_TYPE, applyToEmailView, type EmailView, type TimelineEntry } from '../projections/email-view.ts';
import { admittedMessage } from './support/builders.ts';

const test = suite('timeline and webhooks agree');
/** Retries a thousand times sooner: many attempts fit in a history before the window closes. */
const POLICIES = { delivery: scaleDeliveryPolicy(DELIVERY_POLICY, 0.0001) };

/** mulberry32: the same histories on every run. */
function randomFrom(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  return { next, int, pick: <T>(items: readonly T[]): T => items[int(items.length)] };
}

const VISIBLE_POOL = ['ann@example.test', 'bob@example.test', 'cy@example.test', 'dee@example.test'];
const BCC_MARK = 'secret-bcc';
const RESULTS: TransportResult[] = ['accepted', 'delivered', 'rejected', 'deferred', 'deferred', 'unknown'];
const REPORTED: ReportedOutcome[] = ['delivered', 'delayed', 'delayed', 'soft_bounced', 'hard_bounced', 'complained', 'undetermined'];

interface History {
  events: RecordedEmailEvent[];
  bcc: string[];
}

/** An email's stream as the deciders make it: admission, then claims, attempts, failures and reports in a random order. */
function generate(seed: number): History {
  const r = randomFrom(seed);
  const to = Array.from({ length: 1 + r.int(3) }, () => r.pick(VISIBLE_POOL));
  const cc = Array.from({ length: r.int(3) }, () => r.pick(VISIBLE_POOL));
  const bcc = Array.from({ length: r.int(3) }, (_, i) => `${BCC_MARK}-${seed}-${i}@example.test`);
  const message: AdmittedMessage = admittedMessage({
    emailId: `em_gen${seed}`, to, toAddresses: to, cc, ccAddresses: cc, bccCount: bcc.length, recipientCount: to.length + cc.length + bcc.length,
  });
  let state: EmailState = initialEmailState;
  const events: RecordedEmailEvent[] = [];
  let now = Date.parse(message.occurredAt);
  const at = () => new Date((now += 1000 + r.int(120_000))).toISOString();
  const apply = (command: EmailCommand) => {
    for (const event of decideEmail(command, state, POLICIES)) {
      const recorded = upcastEmailEvent({
        id: `00000000-0000-4000-8000-${String(seed).padStart(6, '0')}${String(events.length).padStart(6, '0')}`,
        streamId: `email-${message.emailId}`, revision: events.length, type: event.type, data: event.data as Record<string, unknown>, metadata: { schemaVersion: 1 },
      });
      events.push(recorded);
      state = evolveEmail(state, recorded);
    }
  };
  const suppressedFirst = r.int(8) === 0;
  if (suppressedFirst) {
    const named = [...bcc, ...to].slice(0, 1 + r.int(2)).map((address) => ({ address, reason: r.pick(['manual', 'hard_bounce', 'complaint']) }));
    apply({ type: 'AdmitEmail', message, senderDomain: { name: 'example.test', verified: true, connected: true }, recipientDomains: [], suppressedRecipients: named });
    return { events, bcc };
  }
  apply({ type: 'AdmitEmail', message, senderDomain: { name: 'example.test', verified: true, connected: true }, recipientDomains: [], suppressedRecipients: [] });
  const transport = r.pick(['smtp', 'mx', 'outbox']);
  const reportId = () => `rep-${r.int(6)}`;
  for (let step = 0; step < 40; step++) {
    const d = state.delivery;
    const choice = r.int(10);
    if (choice < 4 && !d.finished) {
      if (!d.openClaim) {
        if (d.nextAttemptAt) now = Math.max(now, Date.parse(d.nextAttemptAt));
        apply({ type: 'ClaimDelivery', attempt: d.attempts + 1, claimedBy: 'sender-a', transport, at: at() });
      } else if (r.int(6) === 0) {
        apply({ type: 'FailDelivery', attempt: d.openClaim.attempt, claimedBy: 'sender-a', failureCode: r.pick(['content_expired', 'delivery_unknown']), reason: 'it could not go out', at: at() });
      } else {
        // One transaction per address, as the sender begins them (an address listed twice shares
        // one, and a report about it is about each listing); no random draw, so the histories stay.
        const addresses = [...to, ...cc, ...bcc];
        const copies = new Map<string, number[]>();
        for (const index of pendingRecipients(d)) copies.set(addresses[index], [...(copies.get(addresses[index]) ?? []), index]);
        for (const recipients of copies.values()) {
          apply({ type: 'StartTransaction', attempt: d.openClaim.attempt, claimedBy: 'sender-a', recipients, at: new Date(now).toISOString() });
        }
        const results = pendingRecipients(d).filter(() => r.int(8) > 0).map((index) => {
          const result = r.pick(RESULTS);
          return { index, result, smtpCode: result === 'deferred' ? 451 : 250, enhancedCode: null, response: `${result} reply ${r.int(3)}` };
        });
        apply({
          type: 'RecordAttempt', attempt: d.openClaim.attempt, claimedBy: 'sender-a', transport, messageId: '<m@example.test>',
          providerMessageId: r.int(3) === 0 ? null : `prov-${step}`, results, at: at(),
        });
      }
    } else if (choice < 9 && events.length > 1) {
      apply({
        type: 'RecordReport', reportId: reportId(), recipientIndex: r.int(d.recipients.length), outcome: r.pick(REPORTED), format: r.pick(['dsn', 'arf', 'text']),
        status: r.pick([null, '4.4.1', '5.1.1']), diagnosticCode: null, reason: `report ${r.int(3)}`, complaintType: r.pick([null, 'abuse', 'fraud']), at: at(),
      });
    }
  }
  return { events, bcc };
}

const isOutcomeEntry = (e: TimelineEntry) => !['email.queued', 'email.processing', 'email.suppressed', FOLDED_ENTRIES_TYPE].includes(e.type);
const DETAIL_FIELDS = ['bounce_type', 'delay_type', 'complaint_type'] as const;
const webhookIdOf = (event: RecordedEmailEvent, key: string) => `evt_${event.id.replace(/-/g, '')}_${key}`;

function checkAgreement(event: RecordedEmailEvent, before: EmailView | null, after: EmailView, state: EmailState, webhooks: WebhookEvent[], where: string): void {
  const seen = new Set(before?.events.map((e) => e.id) ?? []);
  const added = after.events.filter((e) => !seen.has(e.id) && e.type !== FOLDED_ENTRIES_TYPE);
  const outcomeEntries = added.filter(isOutcomeEntry);
  for (const hook of webhooks) {
    assert.is(hook.data.status, after.status, `${where}: the webhook's status is the document's`);
    assert.is(hook.data.provider_message_id, after.providerMessageId, `${where}: the same provider message id`);
  }
  if (event.type === 'EmailSuppressed') {
    assert.is(webhooks.length, 1, `${where}: one email.suppressed`);
    assert.is(webhooks[0].type, 'email.suppressed');
    assert.is(webhooks[0].data.reason, added[0].payload.reason, `${where}: the same reason, hidden alike`);
    assert.equal(webhooks[0].data.recipients, after.recipients.map((r) => r.address));
    return;
  }
  for (const entry of outcomeEntries) {
    const key = entry.id.slice(entry.id.lastIndexOf(':') + 1);
    const hook = webhooks.find((w) => w.id === webhookIdOf(event, key));
    assert.ok(hook, `${where}: timeline entry ${entry.id} (${entry.type}) has its webhook event`);
    assert.is(hook!.type, entry.type, `${where}: same type`);
    assert.is(hook!.created_at, entry.occurredAt, `${where}: same time`);
    const addresses = (entry.payload.recipients as Array<{ address: string }>).map((x) => x.address);
    assert.equal(hook!.data.recipients, [...new Set(addresses)], `${where}: the same recipients for ${entry.type}`);
    for (const field of DETAIL_FIELDS) assert.is(hook!.data[field], entry.payload[field], `${where}: ${field} of ${entry.type}`);
    if (typeof entry.payload.failureCode === 'string' && (key === 'failed' || key === 'rejected')) {
      assert.ok(hook!.data.reason?.startsWith(entry.payload.failureCode), `${where}: the webhook's reason begins with the failure code`);
    }
  }
  for (const hook of webhooks) {
    const key = hook.id.slice(webhookIdOf(event, '').length);
    const entry = outcomeEntries.find((e) => e.id === `${event.id}:${key}`);
    if (!entry) assert.equal(hook.data.recipients, [], `${where}: a webhook without a timeline entry (${hook.type}) concerns BCC recipients alone`);
  }
  if (webhooks.length === 0) assert.equal(outcomeEntries, [], `${where}: no webhook, no outcome entry`);
  // The status merge: each shown recipient's status is the state's.
  assert.equal(after.recipients.map((r) => r.status), state.delivery.recipients.slice(0, after.recipients.length), `${where}: recipient statuses`);
  assert.is(after.status, state.status, `${where}: email status`);
}

test('generated histories: every webhook event has its timeline entry or concerns BCC alone, with the document\'s status; redeliveries change neither', () => {
  let webhookCount = 0;
  let hiddenOnly = 0;
  const kinds = new Set<string>();
  for (let seed = 1; seed <= 300; seed++) {
    const { events, bcc } = generate(seed);
    const r = randomFrom(seed * 7919);
    let view: EmailView | null = null;
    let state = initialEmailState;
    for (const event of events) {
      const where = `seed ${seed}, ${event.type}@${event.revision}`;
      const before: EmailView | null = view;
      view = applyToEmailView(view, event);
      state = evolveEmail(state, event);
      const hooks = webhookEventsOf(event, state, event.type === 'UnrecognizedEvent' ? '' : event.data.occurredAt);
      checkAgreement(event, before, view!, state, hooks, where);
      webhookCount += hooks.length;
      hiddenOnly += hooks.filter((h) => h.data.recipients.length === 0).length;
      for (const h of hooks) kinds.add(`${h.type}${h.data.bounce_type ?? ''}${h.data.delay_type ?? ''}`);
      for (const text of [JSON.stringify(view), JSON.stringify(hooks)]) {
        for (const address of bcc) assert.not.ok(text.includes(address), `${where}: a BCC address shows`);
      }
      if (r.int(4) === 0) {
        // Redelivered: the document stays as it is and the webhook events are the same ones.
        assert.is(applyToEmailView(view, event), view, `${where}: a redelivery changes nothing`);
        assert.equal(webhookEventsOf(event, state, event.type === 'UnrecognizedEvent' ? '' : event.data.occurredAt).map((h) => h.id), hooks.map((h) => h.id));
      }
    }
  }
  // The histories cover what they claim to.
  for (const kind of ['email.sent', 'email.delivered', 'email.bouncedhard', 'email.bouncedsoft', 'email.complained', 'email.rejected', 'email.failed', 'email.delayedretry', 'email.delayedreported', 'email.suppressed']) {
    assert.ok(kinds.has(kind), `the histories include ${kind}`);
  }
  assert.ok(hiddenOnly > 0, 'some outcomes concern BCC recipients alone');
  assert.ok(webhookCount > 500, `enough webhook events (${webhookCount})`);
});

test('a delay reported after delivery, over the same recipients: the timeline and the webhook both say email.delayed, delay_type reported, status stays delivered', () => {
  const message = admittedMessage();
  let state = initialEmailState;
  let view: EmailView | null = null;
  const commands: EmailCommand[] = [
    { type: 'AdmitEmail', message, senderDomain: { name: 'example.test', verified: true, connected: true }, recipientDomains: [], suppressedRecipients: [] },
    { type: 'ClaimDelivery', attempt: 1, claimedBy: 's', transport: 'mx', at: '2026-11-01T10:00:01.000Z' },
    { type: 'RecordAttempt', attempt: 1, claimedBy: 's', transport: 'mx', messageId: '<m>', providerMessageId: 'p', results: [0, 1, 2].map((index) => ({ index, result: 'delivered' as const, smtpCode: 250, enhancedCode: null, response: '250 ok' })), at: '2026-11-01T10:00:02.000Z' },
    { type: 'RecordReport', reportId: 'r1', recipientIndex: 0, outcome: 'delayed', format: 'dsn', status: '4.4.1', diagnosticCode: null, reason: 'later', complaintType: null, at: '2026-11-01T10:05:00.000Z' },
  ];
  let last: { event: RecordedEmailEvent; hooks: WebhookEvent[] } | null = null;
  for (const command of commands) {
    const events: EmailEvent[] = decideEmail(command, state, POLICIES);
    for (const e of events) {
      const recorded = upcastEmailEvent({ id: `e-${state.revision + 1}`, streamId: 'email-em_test1', revision: state.revision + 1, type: e.type, data: e.data as Record<string, unknown> });
      const before: EmailView | null = view;
      view = applyToEmailView(view, recorded);
      state = evolveEmail(state, recorded);
      const hooks = webhookEventsOf(recorded, state, e.data.occurredAt);
      checkAgreement(recorded, before, view!, state, hooks, recorded.type);
      last = { event: recorded, hooks };
    }
  }
  assert.equal(last!.hooks.map((h) => [h.type, h.data.delay_type, h.data.status, h.data.recipients]), [['email.delayed', 'reported', 'delivered', ['ann@example.test']]]);
  assert.equal(view!.events.at(-1)!.payload.delay_type, 'reported');
  assert.is(view!.status, 'delivered');
});

test.run();
