// Given/when/then tests of the feedback decider (domain/email/feedback.ts) and of what the read
// model (projections/email-view.ts) makes of its events: a report is recorded when it changes
// what is known of its recipient, a report that says nothing new is counted (up to a bound),
// and what one recipient's reports can add to the stream and to the timeline is bounded.
// Recipients of the default message: 0 To, 1 CC, 2 BCC.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import type { EmailEvent, ReportedOutcome } from '../domain/email/events.ts';
import { MAX_REPEATED_REPORTS, MAX_REPORTS_PER_RECIPIENT, decideReport, type RecordReport } from '../domain/email/feedback.ts';
import { foldEmail, reportsAbout, type EmailState } from '../domain/email/state.ts';
import { FOLDED_ENTRIES_TYPE, MAX_TIMELINE_ENTRIES, applyToEmailView, type EmailView } from '../projections/email-view.ts';
import { BCC_INDEX, CC, CC_INDEX, TO, TO_INDEX, accepted, after, attempted, claimed, deliveryFailed, outcome, recorded, suppressed } from './support/email-events.ts';

let reports = 0;
const report = (outcome: ReportedOutcome, overrides: Partial<RecordReport> = {}): RecordReport => ({
  type: 'RecordReport', reportId: `rep-${++reports}`, recipientIndex: TO_INDEX, outcome, format: 'dsn', status: '4.4.1', diagnosticCode: 'smtp; 451',
  reason: 'connection timed out', complaintType: null, at: after(60_000), ...overrides,
});

const sent = (): EmailState => foldEmail(recorded([accepted(), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'sent')])]));
const started = (recipients: number[]): EmailEvent => ({ type: 'DeliveryTransactionStarted', data: { attempt: 1, recipients, occurredAt: after(1_500) } });
/** Sent as the sender sends it: one transaction per address, `copies` its recipients (an address listed twice shares one). */
const sentAs = (copies: number[][], message = accepted()): EmailEvent[] => [
  message, claimed(), ...copies.map(started),
  attempted([outcome(TO_INDEX, 'sent', { address: message.data.toAddresses[0] }), outcome(CC_INDEX, 'sent', { address: message.data.ccAddresses[0] }), outcome(BCC_INDEX, 'sent')]),
];
/** The default message with its To address listed again in CC. */
const toTwice = () => accepted({ cc: [TO], ccAddresses: [TO] });

/** The state after deciding and folding each command in turn, with every event decided. */
function after_(state: EmailState, ...commands: RecordReport[]): { state: EmailState; events: EmailEvent[] } {
  const events: EmailEvent[] = [];
  for (const command of commands) {
    const decided = decideReport(command, state);
    events.push(...decided);
    state = foldEmail(recorded(decided, 'em_test1', state.revision + 1), state);
  }
  return { state, events };
}
const types = (events: EmailEvent[]) => events.map((e) => e.type);

const decide = suite('feedback decider');

decide('given a sent email, when a report about a recipient comes, then RecipientReported naming its address (null for BCC)', () => {
  const [to] = decideReport(report('hard_bounced', { status: '5.1.1' }), sent());
  assert.equal(to, {
    type: 'RecipientReported',
    data: {
      reportId: `rep-${reports}`, recipientIndex: TO_INDEX, address: TO, outcome: 'hard_bounced', format: 'dsn', status: '5.1.1',
      diagnosticCode: 'smtp; 451', reason: 'connection timed out', complaintType: null, occurredAt: after(60_000),
    },
  });
  const [bcc] = decideReport(report('complained', { recipientIndex: BCC_INDEX, complaintType: 'abuse' }), sent());
  assert.is(bcc.type, 'RecipientReported');
  assert.is(bcc.data.address, null);
});

decide('given one copy sent for an address listed in To and CC, when a report comes to its return path, then it is recorded for each recipient the copy was sent for', () => {
  const state = foldEmail(recorded(sentAs([[TO_INDEX, CC_INDEX], [BCC_INDEX]], toTwice())));
  const events = decideReport(report('hard_bounced', { status: '5.1.1' }), state);
  assert.equal(events.map((e) => [e.type, e.data.recipientIndex, e.data.address, e.data.outcome]), [
    ['RecipientReported', TO_INDEX, TO, 'hard_bounced'], ['RecipientReported', CC_INDEX, TO, 'hard_bounced'],
  ]);
  assert.equal({ ...events[1].data, recipientIndex: TO_INDEX }, events[0].data, 'the same report, each recipient named');
  const { state: then } = after_(state, report('complained', { complaintType: 'abuse' }));
  assert.equal(then.delivery.recipients, ['complained', 'complained', 'sent'], 'the BCC recipient had a copy of its own');
  assert.equal(decideReport(report('delayed', { recipientIndex: BCC_INDEX }), state).map((e) => e.data.recipientIndex), [BCC_INDEX]);
});

decide('given one copy sent for an address listed in To and BCC, when a report comes, then it is recorded for both, the BCC one by index only', () => {
  const state = foldEmail(recorded(sentAs([[TO_INDEX, BCC_INDEX], [CC_INDEX]])));
  const events = decideReport(report('complained', { complaintType: 'abuse' }), state);
  assert.equal(events.map((e) => [e.type, e.data.recipientIndex, e.data.address]), [['RecipientReported', TO_INDEX, TO], ['RecipientReported', BCC_INDEX, null]]);
});

decide('given one copy for two recipients of which one already had the outcome recorded, when the report comes, then each is decided on what is known of it', () => {
  const state = foldEmail(recorded([
    ...sentAs([[TO_INDEX, CC_INDEX], [BCC_INDEX]], toTwice()),
    // As a version that recorded the return path's recipient alone left it.
    { type: 'RecipientReported', data: { reportId: 'old', recipientIndex: TO_INDEX, address: TO, outcome: 'delivered', format: 'dsn', status: '2.0.0', diagnosticCode: null, reason: 'delivered', complaintType: null, occurredAt: after(30_000) } },
  ]));
  assert.equal(types(decideReport(report('delivered'), state)), ['RecipientReportRepeated', 'RecipientReported']);
  assert.equal(decideReport(report('delivered', { reportId: 'old' }), state).map((e) => [e.type, e.data.recipientIndex]), [['RecipientReported', CC_INDEX]], 'the same report again: only where it is new');
});

decide('given a stream with no transaction start (an older one), when a report comes, then it is about the recipient its return path names', () => {
  const state = foldEmail(recorded([toTwice(), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent', { address: TO }), outcome(BCC_INDEX, 'sent')])]));
  assert.equal(decideReport(report('hard_bounced'), state).map((e) => e.data.recipientIndex), [TO_INDEX]);
});

decide('given a recipient failed with delivery_unknown, when a DSN says it was delivered, then it is recorded and the recipient is delivered', () => {
  const unknown = foldEmail(recorded([accepted(), claimed(), deliveryFailed([TO_INDEX, CC_INDEX, BCC_INDEX])]));
  assert.is(unknown.status, 'failed');
  const { state, events } = after_(unknown, report('delivered', { status: '2.0.0' }));
  assert.equal(types(events), ['RecipientReported']);
  assert.equal(state.delivery.recipients, ['delivered', 'failed', 'failed']);
  assert.equal(state.delivery.done, [true, true, true]);
  assert.is(state.delivery.finished, true);
  assert.is(after_(state, report('delayed')).state.delivery.recipients[TO_INDEX], 'delivered', 'from there, only up');
});

decide('given no email, a suppressed one, or a recipient the email does not have, when a report comes, then nothing', () => {
  assert.equal(decideReport(report('delayed'), foldEmail([])), []);
  assert.equal(decideReport(report('delayed'), foldEmail(recorded([suppressed([{ address: TO, reason: 'manual' }])]))), []);
  for (const recipientIndex of [-1, 3, 1.5]) assert.equal(decideReport(report('delayed', { recipientIndex }), sent()), [], `index ${recipientIndex}`);
});

decide('given a report recorded, when the same report (same id, same recipient) comes again, then nothing; for another recipient it counts', () => {
  const first = report('delayed');
  const { state } = after_(sent(), first);
  assert.equal(decideReport(first, state), []);
  assert.equal(types(decideReport({ ...first, recipientIndex: CC_INDEX }, state)), ['RecipientReported']);
});

decide('given a delay reported, when more delays come with nothing in between, then each is counted (RecipientReportRepeated) up to the bound, then nothing', () => {
  const { state, events } = after_(sent(), report('delayed'), ...Array.from({ length: MAX_REPEATED_REPORTS + 5 }, () => report('delayed')));
  assert.equal(types(events), ['RecipientReported', ...Array.from({ length: MAX_REPEATED_REPORTS }, () => 'RecipientReportRepeated')]);
  assert.equal(events[1].data, { reportId: `rep-${reports - MAX_REPEATED_REPORTS - 4}`, recipientIndex: TO_INDEX, address: TO, outcome: 'delayed', occurredAt: after(60_000) });
  assert.equal(reportsAbout(state, TO_INDEX), { outcomes: ['delayed'], delayReportedLast: true, events: MAX_REPEATED_REPORTS + 1, repeated: MAX_REPEATED_REPORTS });
  assert.equal(reportsAbout(state, CC_INDEX), { outcomes: [], delayReportedLast: false, events: 0, repeated: 0 }, 'other recipients untouched');
});

decide('given an outcome reported, when the same outcome is reported again (a delivery notice twice), then it is counted, not recorded', () => {
  const { events } = after_(sent(), report('delivered'), report('delivered'), report('hard_bounced'), report('hard_bounced'));
  assert.equal(types(events), ['RecipientReported', 'RecipientReportRepeated', 'RecipientReported', 'RecipientReportRepeated']);
});

decide('given a delay reported, when something else happens to the recipient (a delivery notice, an attempt), then a later delay is recorded again', () => {
  const afterDelivered = after_(sent(), report('delayed'), report('delivered'), report('delayed'));
  assert.equal(types(afterDelivered.events), ['RecipientReported', 'RecipientReported', 'RecipientReported']);
  const reported = after_(sent(), report('delayed'));
  const retried = foldEmail(recorded([
    claimed({ attempt: 2, occurredAt: after(90_000) }),
    attempted([outcome(TO_INDEX, 'delayed')], { attempt: 2, occurredAt: after(91_000), nextAttemptAt: after(200_000) }),
  ], 'em_test1', reported.state.revision + 1), reported.state);
  assert.is(reportsAbout(retried, TO_INDEX).delayReportedLast, false);
  assert.equal(types(decideReport(report('delayed'), retried)), ['RecipientReported'], 'a delay after the retry is news');
  assert.equal(types(decideReport(report('delayed', { recipientIndex: CC_INDEX }), retried)), ['RecipientReported'], 'CC had no delay yet');
});

decide('given an undetermined report, then it is recorded once (kept, it changes no status) and counted after that', () => {
  const { state, events } = after_(sent(), report('undetermined'), report('undetermined'));
  assert.equal(types(events), ['RecipientReported', 'RecipientReportRepeated']);
  assert.is(state.delivery.recipients[TO_INDEX], 'sent');
});

decide('given a recipient with MAX_REPORTS_PER_RECIPIENT report events, when a new outcome comes, then nothing more is written', () => {
  // Alternating outcomes, each a first or a delay after something else, until the bound.
  let state = sent();
  const outcomes: ReportedOutcome[] = ['delayed', 'delivered', 'soft_bounced', 'hard_bounced', 'complained', 'undetermined'];
  let written = 0;
  for (let i = 0; written < MAX_REPORTS_PER_RECIPIENT && i < 1000; i++) {
    const step = after_(state, report(i % 2 === 0 ? 'delayed' : outcomes[(i / 2) % outcomes.length | 0]));
    state = step.state;
    written += step.events.length;
    if (step.events.length === 0) {
      // Nothing new and no more counting: an attempt outcome makes a later delay news again.
      state = foldEmail(recorded([attempted([outcome(TO_INDEX, 'delayed')], { attempt: 1, nextAttemptAt: after(500_000) })], 'em_test1', state.revision + 1), state);
    }
  }
  assert.is(reportsAbout(state, TO_INDEX).events, MAX_REPORTS_PER_RECIPIENT);
  const beyond = foldEmail(recorded([attempted([outcome(TO_INDEX, 'delayed')], { nextAttemptAt: after(600_000) })], 'em_test1', state.revision + 1), state);
  assert.equal(decideReport(report('delayed'), beyond), [], 'a delay after an attempt would be news, but the bound is reached');
  assert.equal(types(decideReport(report('delayed', { recipientIndex: CC_INDEX }), beyond)), ['RecipientReported'], 'the bound is per recipient');
});

decide.run();

// ── the read model ─────────────────────────────────────────────────────────────

const view = suite('email view: reports');

const viewOf = (events: EmailEvent[]): EmailView => recorded(events).reduce(applyToEmailView, null as EmailView | null)!;
const base = () => [accepted(), claimed(), attempted([outcome(TO_INDEX, 'sent'), outcome(CC_INDEX, 'sent'), outcome(BCC_INDEX, 'sent')])] as EmailEvent[];

view('given a sent email, when a delay is reported and then counted twice, then one email.delayed entry saying it was repeated twice, and no other change', () => {
  const { events } = after_(sent(), report('delayed'), report('delayed'), report('delayed'));
  const once = viewOf([...base(), events[0]]);
  const thrice = viewOf([...base(), ...events]);
  assert.equal(thrice.events.map((e) => e.type), ['email.queued', 'email.processing', 'email.sent', 'email.delayed']);
  assert.equal(thrice.events.at(-1), { ...once.events.at(-1)!, payload: { ...once.events.at(-1)!.payload, repeated: 2 } });
  assert.equal({ ...thrice, events: [], streamRevision: 0 }, { ...once, events: [], streamRevision: 0 });
  assert.equal(once.events.at(-1)!.payload, {
    source: 'dsn', delay_type: 'reported', reason: 'connection timed out', recipients: [{ address: TO, status: '4.4.1', diagnosticCode: 'smtp; 451' }],
  });
});

view('given reports of a BCC recipient, recorded or counted, then nothing shows', () => {
  const { events } = after_(sent(), report('complained', { recipientIndex: BCC_INDEX }), report('complained', { recipientIndex: BCC_INDEX }));
  const shown = viewOf([...base(), ...events]);
  assert.equal(shown.events.map((e) => e.type), ['email.queued', 'email.processing', 'email.sent']);
  assert.is(shown.status, 'sent');
});

view('given a repeat of a CC recipient\'s report, then only that recipient\'s entry counts it', () => {
  const { events } = after_(sent(), report('delivered'), report('delivered', { recipientIndex: CC_INDEX }), report('delivered', { recipientIndex: CC_INDEX }));
  const shown = viewOf([...base(), ...events]);
  const entries = shown.events.filter((e) => e.type === 'email.delivered');
  assert.equal(entries.map((e) => [(e.payload.recipients as Array<{ address: string }>)[0].address, e.payload.repeated]), [[TO, undefined], [CC, 1]]);
});

view('given a recipient failed with delivery_unknown, when a DSN says it was delivered, then it shows delivered with deliveredAt, and the failure code stays', () => {
  const events: EmailEvent[] = [accepted(), claimed(), deliveryFailed([TO_INDEX, CC_INDEX, BCC_INDEX])];
  const { events: reported } = after_(foldEmail(recorded(events)), report('delivered', { status: '2.0.0' }), report('delivered', { recipientIndex: CC_INDEX, status: '2.0.0' }));
  const shown = viewOf([...events, ...reported]);
  assert.equal(shown.recipients.map((r) => r.status), ['delivered', 'delivered']);
  assert.is(shown.status, 'delivered');
  assert.is(shown.deliveredAt, after(60_000));
  assert.is(shown.failureCode, 'delivery_unknown');
});

view('given a delay reported under the open claim, when the attempt records the recipient sent, then it shows delayed, sentAt and email.sent are there, and the retry\'s claim leaves it', () => {
  const reportedDelay = decideReport(report('delayed', { at: after(1_800) }), foldEmail(recorded([accepted(), claimed()])));
  const outcomes = attempted([outcome(TO_INDEX, 'sent', { reportedFirst: true }), outcome(CC_INDEX, 'delayed'), outcome(BCC_INDEX, 'sent')], { nextAttemptAt: after(60_000) });
  const shown = viewOf([accepted(), claimed(), ...reportedDelay, outcomes, claimed({ attempt: 2, occurredAt: after(60_000) })]);
  assert.equal(shown.recipients.map((r) => [r.status, r.occurredAt]), [['delayed', after(1_800)], ['processing', after(60_000)]]);
  assert.is(shown.sentAt, after(2_000));
  assert.equal(shown.events.map((e) => e.type), ['email.queued', 'email.processing', 'email.delayed', 'email.sent', 'email.delayed', 'email.processing']);
  assert.equal(shown.doneRecipients, [TO_INDEX]);
});

view(`given more than ${MAX_TIMELINE_ENTRIES} entries, then the admission's entry, one ${FOLDED_ENTRIES_TYPE} entry counting the rest, and the latest`, () => {
  const events: EmailEvent[] = [accepted()];
  for (let attempt = 1; attempt <= 80; attempt++) {
    events.push(claimed({ attempt, occurredAt: after(attempt * 10_000) }));
    events.push(attempted([outcome(TO_INDEX, 'delayed')], { attempt, occurredAt: after(attempt * 10_000 + 1), nextAttemptAt: after(attempt * 10_000 + 5000) }));
  }
  const shown = viewOf(events);
  assert.is(shown.events.length, MAX_TIMELINE_ENTRIES);
  assert.is(shown.events[0].type, 'email.queued');
  const total = 1 + 80 * 2;
  assert.equal(shown.events[1], { id: 'evt-0:folded', type: FOLDED_ENTRIES_TYPE, occurredAt: shown.events[1].occurredAt, payload: { count: total - (MAX_TIMELINE_ENTRIES - 1) } });
  assert.is(shown.events.at(-1)!.id, `evt-${total - 1}:delayed`, 'the latest entry is kept');
  assert.is(shown.events[2].id, `evt-${total - (MAX_TIMELINE_ENTRIES - 2)}`, 'followed by the latest ones, in order');
  assert.ok(shown.events[1].occurredAt < shown.events[2].occurredAt && shown.events[1].occurredAt > shown.events[0].occurredAt, 'the folded entry stands where they were');
  // Folded further, the count grows and the marker stays in place.
  const more = recorded([claimed({ attempt: 81, occurredAt: after(900_000) })], 'em_test1', shown.streamRevision + 1)[0];
  const next = applyToEmailView(shown, more)!;
  assert.is(next.events.length, MAX_TIMELINE_ENTRIES);
  assert.equal(next.events[1].payload, { count: total - (MAX_TIMELINE_ENTRIES - 1) + 1 });
  assert.is(next.events.at(-1)!.type, 'email.processing');
});

view.run();
