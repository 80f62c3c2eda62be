// Given/when/then tests of the admission decider.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { decideAdmission, evolveEmail, foldEmail, initialEmailState, replayOf, type AdmitEmail } from '../domain/email/admission.ts';
import { RelayError } from '../domain/errors.ts';
import { admittedMessage } from './support/builders.ts';

const test = suite('admission decider');

const admit = (overrides = {}, suppressedRecipients: AdmitEmail['suppressedRecipients'] = []): AdmitEmail => ({
  type: 'AdmitEmail',
  message: admittedMessage(overrides),
  suppressedRecipients,
});

test('given no email, when admitted with no suppressed recipient, then EmailAccepted and status queued', () => {
  const events = decideAdmission(admit(), initialEmailState);
  assert.equal(events.map((e) => e.type), ['EmailAccepted']);
  const state = foldEmail(events);
  assert.equal(state.admission, { id: 'em_test1', status: 'queued', testMode: true, reason: null });
  assert.is(state.revision, 0);
});

test('given no email, when a recipient is suppressed, then EmailSuppressed with a reason naming it', () => {
  const events = decideAdmission(admit({}, [{ address: 'cc@example.test', reason: 'hard_bounce' }]), initialEmailState);
  assert.equal(events.map((e) => e.type), ['EmailSuppressed']);
  const state = foldEmail(events);
  assert.is(state.admission?.status, 'suppressed');
  assert.match(state.admission?.reason ?? '', /cc@example\.test.*hard_bounce/);
});

test('given an accepted email, when the same request comes again, then no event and the original result', () => {
  const given = foldEmail(decideAdmission(admit(), initialEmailState));
  assert.equal(decideAdmission(admit(), given), []);
  assert.equal(replayOf(given, 'f1'), given.admission);
});

test('given a suppressed email, when replayed, then it stays suppressed even if the block is gone', () => {
  const given = foldEmail(decideAdmission(admit({}, [{ address: 'ann@example.test', reason: 'manual' }]), initialEmailState));
  assert.equal(decideAdmission(admit(), given), []);
  assert.is(replayOf(given, 'f1')?.status, 'suppressed');
});

test('given an admitted email, when a different body arrives for it, then idempotency_conflict', () => {
  const given = foldEmail(decideAdmission(admit(), initialEmailState));
  try {
    decideAdmission(admit({ fingerprint: 'other' }), given);
    assert.unreachable('should have thrown');
  } catch (error) {
    assert.instance(error, RelayError);
    assert.is((error as RelayError).code, 'idempotency_conflict');
  }
});

test('given an admitted email, when later lifecycle events arrive, then the admission result is unchanged', () => {
  const accepted = foldEmail(decideAdmission(admit(), initialEmailState));
  const later = evolveEmail(accepted, { type: 'EmailSomethingLater', data: {} } as never);
  assert.equal(later.admission, accepted.admission);
  assert.is(later.revision, 1);
});

test('replayOf on a fresh stream is null', () => {
  assert.is(replayOf(initialEmailState, 'f1'), null);
});

test.run();
