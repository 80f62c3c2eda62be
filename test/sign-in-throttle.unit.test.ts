// The sign-in throttle's arithmetic (domain/sign-in-throttle.ts), given/when/then.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ACCOUNT_THROTTLE, ADDRESS_THROTTLE, afterFailure, delayAfterFailure, signInThrottledMessage, waitBeforeAttempt, waitSeconds, type ThrottleState } from '../domain/sign-in-throttle.ts';

test('the free failures cost no wait; after them each wait doubles up to the cap', () => {
  assert.equal([1, 5, 6, 7, 8, 15, 16, 40].map((n) => delayAfterFailure(ACCOUNT_THROTTLE, n)), [0, 0, 1000, 2000, 4000, 512_000, 900_000, 900_000]);
  assert.equal([20, 21, 22].map((n) => delayAfterFailure(ADDRESS_THROTTLE, n)), [0, 1000, 2000]);
});

test('given five failures, when a sixth comes, then the key waits one second from it', () => {
  let state: ThrottleState | null = null;
  for (let i = 0; i < 5; i++) state = afterFailure(ACCOUNT_THROTTLE, state, 1000 * i);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 5000), 0);
  state = afterFailure(ACCOUNT_THROTTLE, state, 5000);
  assert.equal(state, { failures: 6, lastFailureAtMs: 5000 });
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 5400), 600);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 6000), 0);
});

test('given a key quiet for the forget period, when it fails again, then it counts from one', () => {
  const locked: ThrottleState = { failures: 30, lastFailureAtMs: 0 };
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, locked, 1000), 900_000 - 1000);
  const later = ACCOUNT_THROTTLE.forgetAfterMs;
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, locked, later), 0);
  assert.equal(afterFailure(ACCOUNT_THROTTLE, locked, later), { failures: 1, lastFailureAtMs: later });
});

test('given one failure (free), when the clock is stepped back an hour, then the key may try at once and is still counted', () => {
  const state = afterFailure(ACCOUNT_THROTTLE, null, 3_600_000);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 0), 0);
  assert.equal(afterFailure(ACCOUNT_THROTTLE, state, 0), { failures: 2, lastFailureAtMs: 0 });
});

test('given a failure that earned a one-second wait, when it is dated after now (another process\'s clock ahead, a step back), then the wait is one second at most', () => {
  let state: ThrottleState | null = null;
  for (let i = 0; i < 6; i++) state = afterFailure(ACCOUNT_THROTTLE, state, 3_600_000);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 0), 1000);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 3_600_000 - 5_000), 1000);
  assert.is(waitBeforeAttempt(ACCOUNT_THROTTLE, state, 3_600_000 + 400), 600, 'counted from the failure once the clock is past it');
});

test('the message states the wait in whole seconds, at least one', () => {
  assert.equal([1, 999, 1000, 1001, 4000].map(waitSeconds), [1, 1, 1, 2, 4]);
  assert.is(signInThrottledMessage(1), 'too many failed sign-ins: retry in 1 second');
  assert.is(signInThrottledMessage(900), 'too many failed sign-ins: retry in 900 seconds');
});

test.run();
