// The quota decider (domain/usage/quota.ts) on two rules of its charges: a development
// allowance counts only development charges of its key or member (a member's production test
// sends are charged under the same id, as streams written before the rule hold them too), and
// recipients already charged under an email id in the months either side count as charged.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { RelayError } from '../domain/errors.ts';
import { decideCharge, foldUsage, initialUsageState, type ChargeRecipients, type UsageEvent } from '../domain/usage/quota.ts';

const test = suite('quota: development charges, other months');
const MONTH = '2026-12';
const allowances = { workspaceRecipients: 5_000, developmentKeyRecipients: 2 };
let n = 0;
const charge = (recipients: number, overrides: Partial<ChargeRecipients> = {}): ChargeRecipients => ({
  type: 'ChargeRecipients', month: MONTH, emailId: `em_${++n}`, fingerprint: 'f', apiKeyId: 'usr_ann', developmentKey: true,
  recipients, occurredAt: '2026-12-02T10:00:00.000Z', allowances, ...overrides,
});
const stored = (apiKeyId: string, developmentKey: boolean, recipients: number): UsageEvent =>
  ({ type: 'RecipientsCharged', data: { emailId: `em_${++n}`, fingerprint: 'f', apiKeyId, developmentKey, recipients, occurredAt: '2026-12-01T10:00:00.000Z' } });

test('a member\'s production test sends count toward the workspace, not toward their development allowance', () => {
  const state = foldUsage([stored('usr_ann', false, 40), stored('usr_ann', true, 1)], initialUsageState(MONTH));
  assert.equal([state.workspaceRecipients, state.byKey.usr_ann, state.developmentByKey.usr_ann], [41, 41, 1]);
  assert.is(decideCharge(charge(1), state).length, 1, '1 of 2 used: one more fits');
  try {
    decideCharge(charge(2), state);
    assert.unreachable('past the development allowance');
  } catch (error) {
    assert.instance(error, RelayError);
    assert.equal((error as RelayError).details, { allowance: 'development_key', limit: 2, used: 1, requested: 2, resetsAt: '2027-01-01T00:00:00.000Z' });
  }
});

test('recipients charged under the email id in another month are not charged again; only those beyond are', () => {
  const state = initialUsageState(MONTH);
  assert.equal(decideCharge(charge(3, { emailId: 'em_turn', chargedInOtherMonths: 3, developmentKey: false }), state), []);
  assert.equal(decideCharge(charge(2, { emailId: 'em_turn', chargedInOtherMonths: 3, developmentKey: false }), state), []);
  const [beyond] = decideCharge(charge(5, { emailId: 'em_turn', chargedInOtherMonths: 3, developmentKey: false }), state);
  assert.is(beyond.data.recipients, 2);
  // Charged in both months already: the sum is what was charged.
  const both = foldUsage([beyond], state);
  assert.equal(decideCharge(charge(5, { emailId: 'em_turn', chargedInOtherMonths: 3, developmentKey: false }), both), []);
  assert.is(decideCharge(charge(6, { emailId: 'em_turn', chargedInOtherMonths: 3, developmentKey: false }), both)[0].data.recipients, 1);
});

test.run();
