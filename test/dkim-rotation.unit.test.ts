// Given/when/then tests of the DKIM key rotation rule (domain/dkim-rotation.ts): a rotation
// starts pending beside the active key, completes only on a check that found its record, is
// cancelled back to none, and never reuses a selector.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  afterRotationCheck, cancelDkimRotation, MAX_RETIRED_DKIM_KEYS, ROTATION_CHECK_EVERY_MS, rotationAfterCheck, rotationCheckDue, rotationState, selectorsInUse, startDkimRotation, type DkimKeys,
} from '../domain/dkim-rotation.ts';
import { RelayError } from '../domain/errors.ts';
import type { StoredRecordCheck } from '../domain/management.ts';

const T0 = new Date('2026-03-01T00:00:00.000Z');
const T1 = new Date('2026-03-02T00:00:00.000Z');

const active = (overrides: Partial<DkimKeys> = {}): DkimKeys => ({
  name: 'example.test', dkimSelector: 'old', dkimPublicKeyBase64: 'T0xE', dkimPrivateKeySealed: 'v1.k.old', dkimRotation: null, ...overrides,
});
const newKey = (selector = 'new') => ({ selector, publicKeyBase64: 'TkVX', privateKeySealed: 'v1.k.new' });
const check = (status: StoredRecordCheck['status']): StoredRecordCheck => ({
  purpose: 'dkim', name: 'new._domainkey.example.test', type: 'TXT', required: true, status, expected: 'v=DKIM1; k=rsa; p=TkVX', found: [], message: status,
});

function refused(work: () => unknown): RelayError {
  try {
    work();
  } catch (error) {
    if (error instanceof RelayError) return error;
    throw error;
  }
  throw new Error('expected a refusal');
}

const start = suite('starting a rotation');

start('given no rotation, when one starts, then it is pending with the new key while the active key is unchanged', () => {
  const domain = startDkimRotation(active(), newKey(), T0);
  assert.is(rotationState(active()), 'none');
  assert.is(rotationState(domain), 'pending');
  assert.equal(domain.dkimRotation, { ...newKey(), startedAt: T0.toISOString(), check: null, checkedAt: null });
  assert.equal([domain.dkimSelector, domain.dkimPublicKeyBase64, domain.dkimPrivateKeySealed], ['old', 'T0xE', 'v1.k.old']);
});

start('given a rotation pending, when another starts, then it is refused as a conflict and the pending one stands', () => {
  const pending = startDkimRotation(active(), newKey(), T0);
  assert.is(refused(() => startDkimRotation(pending, newKey('newer'), T1)).code, 'conflict');
});

start('given the active selector, or a retired one, as the new key\'s selector, then it is refused as invalid', () => {
  assert.is(refused(() => startDkimRotation(active(), newKey('old'), T0)).code, 'validation_error');
  const retired = active({ dkimRetiredKeys: [{ selector: 'older', publicKeyBase64: 'eA==', retiredAt: T0.toISOString() }] });
  assert.is(refused(() => startDkimRotation(retired, newKey('older'), T0)).code, 'validation_error');
  assert.equal(selectorsInUse(startDkimRotation(retired, newKey(), T0)), ['old', 'new', 'older']);
});

start.run();

const complete = suite('a check of the new key\'s record');

complete('given a pending rotation, when its record is found ok, then the new key is active and the old one retired', () => {
  const done = afterRotationCheck(startDkimRotation(active({ dkimPrivateKeyPem: 'clear old key' }), newKey(), T0), check('ok'), T1);
  assert.is(rotationState(done), 'none');
  assert.equal([done.dkimSelector, done.dkimPublicKeyBase64, done.dkimPrivateKeySealed], ['new', 'TkVX', 'v1.k.new']);
  assert.equal(done.dkimRetiredKeys, [{ selector: 'old', publicKeyBase64: 'T0xE', retiredAt: T1.toISOString() }]);
  assert.not.ok('dkimPrivateKeyPem' in done, 'the old key kept in clear goes with it');
});

for (const status of ['missing', 'mismatch', 'error'] as const) {
  complete(`given a pending rotation, when its record is ${status}, then it stays pending with that check, and the old key signs on`, () => {
    assert.is(rotationAfterCheck(check(status)), 'wait');
    const waiting = afterRotationCheck(startDkimRotation(active(), newKey(), T0), check(status), T1);
    assert.is(rotationState(waiting), 'pending');
    assert.equal(waiting.dkimRotation!.check, check(status));
    assert.is(waiting.dkimRotation!.checkedAt, T1.toISOString());
    assert.is(waiting.dkimSelector, 'old');
  });
}

complete('given many rotations completed, then the newest retired keys are kept, newest first', () => {
  let domain = active({ dkimSelector: 's0' });
  for (let i = 1; i <= MAX_RETIRED_DKIM_KEYS + 2; i++) domain = afterRotationCheck(startDkimRotation(domain, newKey(`s${i}`), T0), check('ok'), T1);
  assert.is(domain.dkimSelector, `s${MAX_RETIRED_DKIM_KEYS + 2}`);
  assert.equal(domain.dkimRetiredKeys!.map((k) => k.selector), Array.from({ length: MAX_RETIRED_DKIM_KEYS }, (_, i) => `s${MAX_RETIRED_DKIM_KEYS + 1 - i}`));
});

complete.run();

const cancel = suite('cancelling a rotation');

cancel('given a pending rotation, when cancelled, then none is pending and the active key is as before', () => {
  const cancelled = cancelDkimRotation(startDkimRotation(active(), newKey(), T0));
  assert.is(rotationState(cancelled), 'none');
  assert.equal([cancelled.dkimSelector, cancelled.dkimPrivateKeySealed], ['old', 'v1.k.old']);
  assert.is(rotationState(startDkimRotation(cancelled, newKey('newer'), T1)), 'pending', 'a new rotation may start');
});

cancel('given no rotation, when cancelled, then not found', () => {
  assert.is(refused(() => cancelDkimRotation(active())).code, 'not_found');
});

cancel.run();

const due = suite('when the re-check pass looks for a pending rotation\'s record');

due('given no rotation, then never', () => {
  assert.not.ok(rotationCheckDue(active(), T1));
});

due('given a rotation never checked, then at once', () => {
  assert.ok(rotationCheckDue(startDkimRotation(active(), newKey(), T0), T0));
});

due('given a rotation checked at T, then not before T + ROTATION_CHECK_EVERY_MS, and from then on', () => {
  const at = new Date('2026-11-28T10:00:00.000Z');
  const checked = afterRotationCheck(startDkimRotation(active(), newKey(), T0), check('missing'), at);
  const later = (ms: number) => new Date(at.getTime() + ms);
  assert.not.ok(rotationCheckDue(checked, later(ROTATION_CHECK_EVERY_MS - 1)));
  assert.ok(rotationCheckDue(checked, later(ROTATION_CHECK_EVERY_MS)));
});

due('given a check stamped ahead of now (the clock stepped back), then it does not hold the next one off', () => {
  const at = new Date('2026-11-28T10:00:00.000Z');
  const checked = afterRotationCheck(startDkimRotation(active(), newKey(), T0), check('missing'), at);
  assert.ok(rotationCheckDue(checked, new Date(at.getTime() - 3_600_000)));
});

due.run();
