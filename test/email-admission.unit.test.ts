// Given/when/then tests of the admission decider: every rule of domain/email/admission.ts has
// a test that fails without it.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { unhandled } from '../domain/decider.ts';
import { decideAdmission, replayOf, type AdmitEmail, type DomainFacts } from '../domain/email/admission.ts';
import { decideEmail, emailDecider, type EmailCommand } from '../domain/email/decider.ts';
import { DELIVERY_POLICY } from '../domain/email/delivery.ts';
import { evolveEmail, foldEmail, initialEmailState } from '../domain/email/state.ts';
import { RelayError } from '../domain/errors.ts';
import { admittedMessage } from './support/builders.ts';
import { recorded } from './support/email-events.ts';

const test = suite('admission decider');

const usable = (name: string): DomainFacts => ({ name, verified: true, connected: true });

const admit = (overrides: Partial<AdmitEmail> = {}, message = {}): AdmitEmail => ({
  type: 'AdmitEmail',
  message: admittedMessage(message),
  senderDomain: usable('example.test'),
  recipientDomains: [usable('example.test')],
  suppressedRecipients: [],
  ...overrides,
});

function refusal(work: () => unknown): string {
  try {
    work();
  } catch (error) {
    assert.instance(error, RelayError);
    return (error as RelayError).code;
  }
  assert.unreachable('should have been refused');
  return '';
}

test('given no email, when admitted with no suppressed recipient, then EmailAccepted and status queued', () => {
  const events = decideAdmission(admit(), initialEmailState);
  assert.equal(events.map((e) => e.type), ['EmailAccepted']);
  const state = foldEmail(events);
  assert.equal(state.admission, { id: 'em_test1', status: 'queued', testMode: true, reason: null });
  assert.is(state.revision, 0);
});

test('given no email, when a recipient is suppressed, then EmailSuppressed with a reason naming it', () => {
  const events = decideAdmission(admit({ suppressedRecipients: [{ address: 'cc@example.test', reason: 'hard_bounce' }] }), initialEmailState);
  assert.equal(events.map((e) => e.type), ['EmailSuppressed']);
  const state = foldEmail(events);
  assert.is(state.admission?.status, 'suppressed');
  assert.match(state.admission?.reason ?? '', /cc@example\.test.*hard_bounce/);
});

test('given no email, when the sender domain is not verified, then domain_not_verified and no event', () => {
  assert.is(refusal(() => decideAdmission(admit({ senderDomain: { name: 'example.test', verified: false, connected: true } }), initialEmailState)), 'domain_not_verified');
});

test('given no email, when the sender domain is verified but not connected to the project, then sender_not_allowed', () => {
  assert.is(refusal(() => decideAdmission(admit({ senderDomain: { name: 'example.test', verified: true, connected: false } }), initialEmailState)), 'sender_not_allowed');
});

test('given no email, when a development key sends to a domain outside the project, then test_recipient_not_allowed naming it', () => {
  const command = admit({ recipientDomains: [usable('example.test'), { name: 'gmail.test', verified: false, connected: false }] });
  try {
    decideAdmission(command, initialEmailState);
    assert.unreachable();
  } catch (error) {
    assert.is((error as RelayError).code, 'test_recipient_not_allowed');
    assert.match((error as Error).message, /gmail\.test/);
  }
});

test('given no email, when a development key sends to a verified domain of another project, then test_recipient_not_allowed', () => {
  const command = admit({ recipientDomains: [{ name: 'other.test', verified: true, connected: false }] });
  assert.is(refusal(() => decideAdmission(command, initialEmailState)), 'test_recipient_not_allowed');
});

test('given no email, when a production key sends anywhere, then recipient domains do not matter', () => {
  const command = admit({ recipientDomains: [{ name: 'gmail.test', verified: false, connected: false }] }, { testMode: false });
  assert.equal(decideAdmission(command, initialEmailState).map((e) => e.type), ['EmailAccepted']);
});

test('given no email, when the sender is refused and a recipient suppressed, then the refusal wins (a rejection, not an answer)', () => {
  const command = admit({ senderDomain: { name: 'example.test', verified: false, connected: false }, suppressedRecipients: [{ address: 'ann@example.test', reason: 'manual' }] });
  assert.is(refusal(() => decideAdmission(command, initialEmailState)), 'domain_not_verified');
});

test('given an accepted email, when the same request comes again, then no event and the original result', () => {
  const given = foldEmail(decideAdmission(admit(), initialEmailState));
  assert.equal(decideAdmission(admit(), given), []);
  assert.equal(replayOf(given, 'f1'), given.admission);
});

test('given an accepted email, when replayed after its domain lost verification, then still the original result', () => {
  const given = foldEmail(decideAdmission(admit(), initialEmailState));
  assert.equal(decideAdmission(admit({ senderDomain: { name: 'example.test', verified: false, connected: false } }), given), []);
});

test('given a suppressed email, when replayed, then it stays suppressed even if the block is gone', () => {
  const given = foldEmail(decideAdmission(admit({ suppressedRecipients: [{ address: 'ann@example.test', reason: 'manual' }] }), initialEmailState));
  assert.equal(decideAdmission(admit(), given), []);
  assert.is(replayOf(given, 'f1')?.status, 'suppressed');
});

test('given an admitted email, when a different body arrives for it, then idempotency_conflict', () => {
  const given = foldEmail(decideAdmission(admit(), initialEmailState));
  assert.is(refusal(() => decideAdmission(admit({}, { fingerprint: 'other' }), given)), 'idempotency_conflict');
});

test('given an admitted email, when later lifecycle events arrive, then the admission result is unchanged', () => {
  const accepted = foldEmail(decideAdmission(admit(), initialEmailState));
  const later = evolveEmail(accepted, { type: 'UnrecognizedEvent', data: { type: 'EmailSomethingLater' } });
  assert.equal(later.admission, accepted.admission);
  assert.is(later.revision, 1);
});

test('replayOf on a fresh stream is null', () => {
  assert.is(replayOf(initialEmailState, 'f1'), null);
});

test('given a stream whose admission this version cannot read, when the request comes again, then service_unavailable and no event', () => {
  const given = evolveEmail(initialEmailState, { type: 'UnrecognizedEvent', data: { type: 'EmailAccepted', schemaVersion: 2 } });
  assert.is(refusal(() => decideAdmission(admit(), given)), 'service_unavailable');
  assert.is(refusal(() => decideAdmission(admit({}, { fingerprint: 'other' }), given)), 'service_unavailable');
  assert.is(refusal(() => replayOf(given, 'f1')), 'service_unavailable');
});

test('given a stream with an event of a type this version does not know, when an email is admitted on it, then refused: an admission is only a first event', () => {
  const given = evolveEmail(initialEmailState, { type: 'UnrecognizedEvent', data: { type: 'EmailScheduled' } });
  assert.is(refusal(() => decideAdmission(admit(), given)), 'service_unavailable');
});

test.run();

const aggregate = suite('the email aggregate');

aggregate('a command of a type no rule knows is refused loudly (the switch is exhaustive for the typecheck; this is the run-time guard)', () => {
  assert.throws(() => decideEmail({ type: 'SendPigeon' } as unknown as EmailCommand, initialEmailState, { delivery: DELIVERY_POLICY }), /unhandled email command: \{"type":"SendPigeon"\}/);
  assert.throws(() => unhandled('x' as never, 'thing'), (error: Error) => error.message === 'unhandled thing: "x"');
});

aggregate('the bound decider decides with its policies, starts from the initial state, reads through the upcaster', () => {
  const decider = emailDecider({ delivery: DELIVERY_POLICY });
  assert.is(decider.initialState(), initialEmailState);
  const events = decider.decide(admit(), decider.initialState());
  assert.equal(events.map((e) => e.type), ['EmailAccepted']);
  assert.is(decider.fold(recorded(events), decider.initialState()).status, 'queued');
  assert.is(decider.upcast({ id: 'e', streamId: 'email-x', revision: 0, type: 'EmailOpened', data: {} })?.type, 'UnrecognizedEvent');
  assert.is(decider.schemaVersions?.RecipientReportRepeated, 1);
});

aggregate.run();
