// What the usage ledger keeps of its streams (apps/services/usage-folds.ts). Pins: the folds kept
// stay within a budget of estimated bytes, the least recently used going first, and a fold larger
// than the budget alone still stays while in use; a month kept as final (its email ids' hashes)
// never says an email id it charged was not charged.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { FinalMonth, UsageFolds, type Folded } from '../apps/services/usage-folds.ts';
import { decideCharges, DEFAULT_ALLOWANCES, foldUsage, initialUsageState, type ChargeRecipients } from '../domain/usage/quota.ts';

const MONTH = '2026-11';

/** A month of `charges` charges of one recipient each, email ids `em_<prefix><n>`. */
function month(charges: number, prefix = 'x'): Folded {
  const commands = Array.from({ length: charges }, (_, i): ChargeRecipients => ({
    type: 'ChargeRecipients', month: MONTH, emailId: `em_${prefix}${i}`, fingerprint: 'f', apiKeyId: 'key_1', developmentKey: false,
    recipients: 1, occurredAt: '2026-11-02T00:00:00.000Z', allowances: { ...DEFAULT_ALLOWANCES, workspaceRecipients: 1e9 },
  }));
  return { state: foldUsage(decideCharges(commands, initialUsageState(MONTH)).events, initialUsageState(MONTH)), revision: charges - 1 };
}

test('folds stay within the budget, the least recently used or asked going first', () => {
  const one = new UsageFolds(Number.MAX_SAFE_INTEGER);
  one.keep('s', month(10));
  const kept = (folds: UsageFolds, streams: string[]) => streams.map((s) => folds.fold(s) !== undefined || folds.final(s) !== undefined);

  const folds = new UsageFolds(3 * one.bytes);
  for (const stream of ['a', 'b', 'c']) folds.keep(stream, month(10));
  folds.keep('a', month(10)); // used again: 'b' is now the oldest
  folds.keep('d', month(10));
  assert.equal(kept(folds, ['a', 'b', 'c', 'd']), [true, false, true, true]);
  assert.ok(folds.bytes <= 3 * one.bytes);

  const finals = new UsageFolds(2 * one.bytes);
  finals.keep('a', month(10));
  finals.keepFinal('b', month(10));
  finals.keep('c', month(10));
  assert.ok(finals.final('b')); // asked: 'c' is now the oldest
  finals.keep('d', month(10));
  assert.equal(kept(finals, ['a', 'b', 'c', 'd']), [false, true, false, true]);
});

test('a fold larger than the budget alone stays, the others go', () => {
  const folds = new UsageFolds(50_000);
  folds.keep('small', month(10));
  folds.keep('large', month(1_000));
  assert.equal([folds.fold('small'), folds.size], [undefined, 1]);
  assert.is(folds.fold('large')?.state.workspaceRecipients, 1_000);
  folds.forget('large');
  assert.equal([folds.size, folds.bytes], [0, 0]);
});

test('a month kept as final finds every email id it charged, and no other', () => {
  const folded = month(20_000);
  const final = new FinalMonth(folded.state);
  for (let i = 0; i < 20_000; i++) assert.ok(final.mayHaveCharged(`em_x${i}`), `em_x${i}`);
  const found = Array.from({ length: 100_000 }, (_, i) => `em_y${i}`).filter((id) => final.mayHaveCharged(id));
  assert.equal(found, []);
  assert.is(new FinalMonth(initialUsageState(MONTH)).mayHaveCharged('em_x0'), false);
});

test.run();
