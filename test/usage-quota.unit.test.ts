// Given/when/then tests of the monthly recipient allowances (domain/usage/quota.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RelayError } from '../domain/errors.ts';
import { usageDecider } from '../domain/usage/decider.ts';
import { upcastUsageEvent } from '../domain/usage/upcast.ts';
import {
  allowancesOf, checkAllowance, DEFAULT_ALLOWANCES, MAX_ALLOWANCE, decideCharge, decideCharges, foldUsage, initialUsageState, monthEnd, monthOf, usageStreamId,
  type ChargeRecipients, type UsageEvent, type UsageState,
} from '../domain/usage/quota.ts';

const test = suite('monthly recipient quota');
const MONTH = '2026-11';

let n = 0;
const charge = (recipients: number, overrides: Partial<ChargeRecipients> = {}): ChargeRecipients => ({
  type: 'ChargeRecipients', month: MONTH, emailId: `em_${++n}`, fingerprint: 'f', apiKeyId: 'key_live', developmentKey: false,
  recipients, occurredAt: '2026-11-22T10:00:00.000Z', allowances: DEFAULT_ALLOWANCES, ...overrides,
});

/** A month with `used` recipients already charged (to `apiKeyId`). */
const given = (used: number, apiKeyId = 'key_live', developmentKey = false): UsageState =>
  foldUsage(decideCharge(charge(used, { apiKeyId, developmentKey }), initialUsageState(MONTH)), initialUsageState(MONTH));

function refused(fn: () => unknown): RelayError {
  try {
    fn();
  } catch (error) {
    assert.instance(error, RelayError);
    assert.is((error as RelayError).code, 'quota_exceeded');
    return error as RelayError;
  }
  throw new Error('expected quota_exceeded');
}

test('months are UTC calendar months; the allowance resets at the first instant of the next', () => {
  assert.is(monthOf(new Date('2026-11-30T23:59:59.999Z')), '2026-11');
  assert.is(monthOf(new Date('2026-12-01T00:00:00.000Z')), '2026-12');
  assert.is(monthOf(new Date('2026-12-01T00:30:00.000+01:00')), '2026-11');
  assert.is(monthEnd('2026-11').toISOString(), '2026-12-01T00:00:00.000Z');
  assert.is(monthEnd('2026-12').toISOString(), '2027-01-01T00:00:00.000Z');
  assert.is(usageStreamId('ws_1', '2026-11'), 'usage-ws_1-2026-11');
});

test('given an empty month, when charged, then RecipientsCharged and the workspace and key totals grow', () => {
  const events = decideCharge(charge(7, { emailId: 'em_a', apiKeyId: 'key_a' }), initialUsageState(MONTH));
  assert.equal(events, [{ type: 'RecipientsCharged', data: { emailId: 'em_a', fingerprint: 'f', apiKeyId: 'key_a', developmentKey: false, recipients: 7, occurredAt: '2026-11-22T10:00:00.000Z' } }]);
  const state = foldUsage(events, initialUsageState(MONTH));
  assert.is(state.workspaceRecipients, 7);
  assert.equal(state.byKey, { key_a: 7 });
});

test('given 4,990 used, 10 more reach exactly 5,000; 11 are refused naming the workspace allowance and its reset', () => {
  assert.is(decideCharge(charge(10), given(4_990)).length, 1);
  const error = refused(() => decideCharge(charge(11), given(4_990)));
  assert.match(error.message, /workspace/);
  assert.match(error.message, /2026-12-01T00:00:00.000Z/);
  assert.equal([error.details.allowance, error.details.used, error.details.requested], ['workspace', 4_990, 11]);
  refused(() => decideCharge(charge(1), given(5_000)));
});

test('given a development key at 995, 5 more are allowed and 6 refused for the key; production keys have no per-key cap', () => {
  const dev = given(995, 'key_dev', true);
  assert.is(decideCharge(charge(5, { apiKeyId: 'key_dev', developmentKey: true }), dev).length, 1);
  const error = refused(() => decideCharge(charge(6, { apiKeyId: 'key_dev', developmentKey: true }), dev));
  assert.is(error.details.allowance, 'development_key');
  assert.match(error.message, /development key/);
  assert.is(decideCharge(charge(6, { apiKeyId: 'key_other_dev', developmentKey: true }), dev).length, 1, 'another development key has its own cap');
  assert.is(decideCharge(charge(1_500), given(995)).length, 1, 'a production key is capped by the workspace only');
});

test('development keys count toward the workspace: at 4,999 used, a development key with room is still refused', () => {
  const state = given(4_999);
  refused(() => decideCharge(charge(2, { apiKeyId: 'key_dev', developmentKey: true }), state));
});

test('the same email and request charged again (a retried admission) adds nothing; a different request under that id adds nothing either', () => {
  const first = charge(3, { emailId: 'em_same', fingerprint: 'f1' });
  const state = foldUsage(decideCharge(first, initialUsageState(MONTH)), initialUsageState(MONTH));
  assert.equal(decideCharge({ ...first }, state), []);
  assert.equal(decideCharge({ ...first, fingerprint: 'f2' }, state), []);
  assert.equal(decideCharge({ ...first, fingerprint: 'f2', recipients: 1 }, state), []);
});

// Requests with one Idempotency-Key share the email id: only one of them is admitted (the others
// are 409 idempotency_conflict, not charged), so the id is charged once between them.
test('a second request under a charged email id, at a full allowance, is neither charged nor refused', () => {
  const full = { workspaceRecipients: 3, developmentKeyRecipients: 3 };
  const first = charge(3, { emailId: 'em_key', fingerprint: 'f1', apiKeyId: 'key_dev', developmentKey: true, allowances: full });
  const state = foldUsage(decideCharge(first, initialUsageState(MONTH)), initialUsageState(MONTH));
  assert.equal(decideCharge({ ...first, fingerprint: 'f2' }, state), []);
  const { outcomes, events } = decideCharges([{ ...first, fingerprint: 'f3' }, { ...first, fingerprint: 'f4', recipients: 2 }], state);
  assert.equal(outcomes.map((o) => o.ok), [true, true]);
  assert.equal(events, []);
});

test('a second request under a charged email id with more recipients is charged the ones beyond (either body may be the one admitted)', () => {
  const first = charge(2, { emailId: 'em_more', fingerprint: 'f1' });
  const state = foldUsage(decideCharge(first, given(10)), given(10));
  const more = decideCharge({ ...first, fingerprint: 'f2', recipients: 5 }, state);
  assert.equal(more.map((e) => e.data.recipients), [3]);
  const after = foldUsage(more, state);
  assert.is(after.workspaceRecipients, 15);
  assert.is(after.charged.recipientsOf('em_more'), 5);
  assert.equal(decideCharge({ ...first, fingerprint: 'f3', recipients: 5 }, after), []);
  const tight = { workspaceRecipients: 13, developmentKeyRecipients: 1_000 };
  const error = refused(() => decideCharge({ ...first, fingerprint: 'f2', recipients: 5, allowances: tight }, state));
  assert.equal([error.details.used, error.details.requested], [12, 3]);
});

test('a stream charged per email id and fingerprint (before) folds to one entry per email id, its counts summed', () => {
  const data = (fingerprint: string, recipients: number): UsageEvent => ({ type: 'RecipientsCharged', data: { emailId: 'em_old', fingerprint, apiKeyId: 'k', developmentKey: false, recipients, occurredAt: '2026-11-02T00:00:00.000Z' } });
  const state = foldUsage([data('f1', 2), data('f2', 2)], initialUsageState(MONTH));
  assert.equal([...state.charged], ['em_old']);
  assert.is(state.charged.recipientsOf('em_old'), 4);
  assert.is(state.workspaceRecipients, 4);
  assert.equal(decideCharge(charge(4, { emailId: 'em_old', fingerprint: 'f3' }), state), []);
});

test('charges queued together are decided in order, each on what the previous left', () => {
  const { outcomes, events, state } = decideCharges([charge(3), charge(5), charge(4), charge(1)], given(4_993));
  assert.equal(outcomes.map((o) => o.ok), [true, false, true, false]);
  assert.is(events.length, 2);
  assert.is(state.workspaceRecipients, 5_000);
  const second = outcomes[1];
  assert.ok(!second.ok && second.error.code === 'quota_exceeded');
});

test('folding never changes the state it starts from; unknown events are skipped', () => {
  const before = given(10);
  const snapshot = { total: before.workspaceRecipients, keys: { ...before.byKey }, charged: [...before.charged] };
  const after = foldUsage([...decideCharge(charge(5), before), { type: 'SomethingLater', data: {} } as unknown as UsageEvent], before);
  assert.is(after.workspaceRecipients, 15);
  assert.equal({ total: before.workspaceRecipients, keys: before.byKey, charged: [...before.charged] }, snapshot);
});

test('a workspace without settings has the spec\'s allowances; one set replaces only its own default', () => {
  assert.equal(DEFAULT_ALLOWANCES, { workspaceRecipients: 5_000, developmentKeyRecipients: 1_000 });
  assert.equal(allowancesOf(undefined), DEFAULT_ALLOWANCES);
  assert.equal(allowancesOf({}), DEFAULT_ALLOWANCES);
  assert.equal(allowancesOf({ workspaceRecipients: 20_000 }), { workspaceRecipients: 20_000, developmentKeyRecipients: 1_000 });
  assert.equal(allowancesOf({ developmentKeyRecipients: 0 }), { workspaceRecipients: 5_000, developmentKeyRecipients: 0 });
});

test('given a workspace allowance of 20,000, the 5,001st recipient is admitted and the 20,001st refused naming 20,000', () => {
  const allowances = { workspaceRecipients: 20_000, developmentKeyRecipients: 1_000 };
  assert.is(decideCharge(charge(1, { allowances }), given(5_000)).length, 1);
  assert.is(decideCharge(charge(15_000, { allowances }), given(5_000)).length, 1);
  const error = refused(() => decideCharge(charge(15_001, { allowances }), given(5_000)));
  assert.equal([error.details.allowance, error.details.limit, error.details.used], ['workspace', 20_000, 5_000]);
  assert.match(error.message, /monthly allowance of 20000 recipients/);
});

test('given a lowered allowance below what is used, nothing more is admitted this month; 0 stops sending', () => {
  refused(() => decideCharge(charge(1, { allowances: { workspaceRecipients: 100, developmentKeyRecipients: 1_000 } }), given(150)));
  refused(() => decideCharge(charge(1, { allowances: { workspaceRecipients: 0, developmentKeyRecipients: 1_000 } }), initialUsageState(MONTH)));
  assert.equal(decideCharge(charge(0, { allowances: { workspaceRecipients: 0, developmentKeyRecipients: 0 } }), initialUsageState(MONTH)).length, 1, 'zero recipients fit any allowance');
});

test('given a development key cap of 50, the 51st recipient of that key is refused for the key', () => {
  const allowances = { workspaceRecipients: 5_000, developmentKeyRecipients: 50 };
  const dev = given(45, 'key_dev', true);
  assert.is(decideCharge(charge(5, { apiKeyId: 'key_dev', developmentKey: true, allowances }), dev).length, 1);
  const error = refused(() => decideCharge(charge(6, { apiKeyId: 'key_dev', developmentKey: true, allowances }), dev));
  assert.equal([error.details.allowance, error.details.limit], ['development_key', 50]);
});

test('an allowance an operator sets is a whole number from 0 to a billion', () => {
  for (const ok of [0, 1, 5_000, MAX_ALLOWANCE]) assert.is(checkAllowance('x', ok), ok);
  for (const bad of [-1, 1.5, MAX_ALLOWANCE + 1, Number.NaN, Number.POSITIVE_INFINITY]) {
    assert.throws(() => checkAllowance('workspaceRecipients', bad), (e: RelayError) => e.code === 'validation_error' && /workspaceRecipients/.test(e.message), String(bad));
  }
});

test('a charge for another month is a programming error, not a refusal', () => {
  assert.throws(() => decideCharge(charge(1, { month: '2026-12' }), initialUsageState(MONTH)), (e: Error) => !(e instanceof RelayError));
});

test.run();

const reading = suite('usage streams: reading and the decider');

reading('upcast: RecipientsCharged of a known version is read; other types and newer versions count nothing', () => {
  const data = { emailId: 'em_1', fingerprint: 'f', apiKeyId: 'k', developmentKey: false, recipients: 2, occurredAt: '2026-11-01T00:00:00.000Z' };
  assert.equal(upcastUsageEvent({ type: 'RecipientsCharged', data, metadata: { schemaVersion: 1 } }), { type: 'RecipientsCharged', data });
  assert.equal(upcastUsageEvent({ type: 'RecipientsCharged', data }), { type: 'RecipientsCharged', data }, 'no version is version 1');
  assert.is(upcastUsageEvent({ type: 'RecipientsCharged', data, metadata: { schemaVersion: 2 } }), null);
  assert.is(upcastUsageEvent({ type: 'RecipientsRefunded', data }), null);
});

reading('the month\'s decider starts empty for its month, decides a batch in order and folds what it decided', () => {
  const decider = usageDecider('2026-11');
  const state = decider.initialState();
  assert.equal({ ...state, charged: [...state.charged] }, { month: '2026-11', workspaceRecipients: 0, byKey: {}, developmentByKey: {}, charged: [] });
  const command = (emailId: string, recipients: number) => ({
    type: 'ChargeRecipients' as const, month: '2026-11', emailId, fingerprint: 'f', apiKeyId: 'k', developmentKey: false, recipients, occurredAt: '2026-11-02T00:00:00.000Z', allowances: DEFAULT_ALLOWANCES,
  });
  const events = decider.decide([command('em_1', 3), command('em_2', 4)], state);
  assert.equal(events.map((e) => e.data.emailId), ['em_1', 'em_2']);
  assert.is(decider.fold(events, state).workspaceRecipients, 7);
  assert.is(decider.schemaVersions?.RecipientsCharged, 1);
});

reading.run();
