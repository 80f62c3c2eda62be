// Sign-in throttling: how many wrong sign-ins an account or a client address may make before it
// must wait, and how long. Pure: the counts live in the document store
// (apps/services/management/sign-in-throttle.ts).
//
// Each key (an account, named by the email as typed and normalized, whether or not a user has
// it; a client address, for IPv6 its /64, which any host on it may pick addresses from) counts
// its failed sign-ins. The first few are free; after that each
// failure makes the key wait before its next attempt, twice as long as the one before, up to a
// cap. A key's failures are forgotten a while after its last one. An attempt is counted as a
// failure when it starts (so that parallel attempts cannot all start before any has failed) and
// forgiven if it was not one. A successful sign-in clears its account's count and takes back
// only its own attempt from its address's (an attacker with an account of their own must not be
// able to clear the count of the address they guess from).

export type ThrottleKind = 'account' | 'address';

export interface ThrottlePolicy {
  kind: ThrottleKind;
  /** Failures with no wait after them. */
  freeFailures: number;
  /** The wait after the first failure beyond the free ones; doubles with each further one. */
  firstDelayMs: number;
  maxDelayMs: number;
  /** A key whose last failure is older than this starts again from nothing. */
  forgetAfterMs: number;
}

/** One person guessing one account: five tries, then 1 s, 2 s, 4 s … up to 15 minutes. */
export const ACCOUNT_THROTTLE: ThrottlePolicy = { kind: 'account', freeFailures: 5, firstDelayMs: 1000, maxDelayMs: 15 * 60_000, forgetAfterMs: 24 * 60 * 60_000 };
/** One address trying many accounts (an office behind one NAT shares it): twenty, then the same growth. */
export const ADDRESS_THROTTLE: ThrottlePolicy = { kind: 'address', freeFailures: 20, firstDelayMs: 1000, maxDelayMs: 15 * 60_000, forgetAfterMs: 24 * 60 * 60_000 };

export const SIGN_IN_THROTTLES: readonly ThrottlePolicy[] = [ACCOUNT_THROTTLE, ADDRESS_THROTTLE];

export interface ThrottleState {
  /** Failures counted since the key was last forgotten (or cleared). */
  failures: number;
  lastFailureAtMs: number;
}

/** The wait after a key's n-th failure. */
export function delayAfterFailure(policy: ThrottlePolicy, failures: number): number {
  if (failures <= policy.freeFailures) return 0;
  return Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** Math.min(30, failures - policy.freeFailures - 1));
}

/**
 * The state that still counts at `nowMs`: null once forgotten. A failure dated after `nowMs` (the
 * clock stepped back since, or another API process's clock ahead of this one's) is as recent as
 * one dated now.
 */
export function liveState(policy: ThrottlePolicy, state: ThrottleState | null, nowMs: number): ThrottleState | null {
  return state && Math.max(0, nowMs - state.lastFailureAtMs) < policy.forgetAfterMs ? state : null;
}

/**
 * Milliseconds the key must still wait before an attempt (counted from its last failure), 0 when
 * it may try now. Never more than the delay its failures earned, however far after `nowMs` the
 * last one is dated: a clock stepped back must not turn a free failure into a lock-out for the
 * size of the step.
 */
export function waitBeforeAttempt(policy: ThrottlePolicy, state: ThrottleState | null, nowMs: number): number {
  const live = liveState(policy, state, nowMs);
  if (!live) return 0;
  const delayMs = delayAfterFailure(policy, live.failures);
  return Math.min(delayMs, Math.max(0, live.lastFailureAtMs + delayMs - nowMs));
}

/** The key's state after one more failure at `nowMs`. */
export function afterFailure(policy: ThrottlePolicy, state: ThrottleState | null, nowMs: number): ThrottleState {
  return { failures: (liveState(policy, state, nowMs)?.failures ?? 0) + 1, lastFailureAtMs: nowMs };
}

/** Whole seconds of a wait, at least 1: what Retry-After and the message say. */
export const waitSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

export const signInThrottledMessage = (seconds: number): string =>
  `too many failed sign-ins: retry in ${seconds} ${seconds === 1 ? 'second' : 'seconds'}`;
