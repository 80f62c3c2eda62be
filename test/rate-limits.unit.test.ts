// The window arithmetic of the request-rate limits (domain/rate-limits.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import {
  CLOCK_SKEW_TOLERANCE_MS, DEV_KEY_RATE, PRODUCTION_KEY_RATE, WORKSPACE_RATE, clockWindowAt, openedWindow, rateLimitHeaders, rateLimitedMessage,
  ratePoliciesFor, resetSeconds, retryAfterSeconds, windowRuns,
} from '../domain/rate-limits.ts';

const test = suite('rate-limit windows');
const T = Date.parse('2026-11-22T10:00:00.000Z');

test('the spec\'s policies: development key 15 per 60 s from its first request; production key 100 and workspace 200 per clock second', () => {
  assert.equal([DEV_KEY_RATE.limit, DEV_KEY_RATE.windowMs, DEV_KEY_RATE.start], [15, 60_000, 'first-request']);
  assert.equal([PRODUCTION_KEY_RATE.limit, PRODUCTION_KEY_RATE.windowMs, PRODUCTION_KEY_RATE.start], [100, 1_000, 'clock']);
  assert.equal([WORKSPACE_RATE.limit, WORKSPACE_RATE.windowMs, WORKSPACE_RATE.start], [200, 1_000, 'clock']);
  assert.equal(ratePoliciesFor('development'), [DEV_KEY_RATE, WORKSPACE_RATE]);
  assert.equal(ratePoliciesFor('production'), [PRODUCTION_KEY_RATE, WORKSPACE_RATE]);
});

test('clock windows are whole seconds: the first and the last millisecond of a second share one', () => {
  const first = clockWindowAt(PRODUCTION_KEY_RATE, T);
  assert.equal(first, { key: String(T), startMs: T, endMs: T + 1000 });
  assert.equal(clockWindowAt(PRODUCTION_KEY_RATE, T + 999), first);
  assert.equal(clockWindowAt(PRODUCTION_KEY_RATE, T + 1000).startMs, T + 1000);
  assert.equal(clockWindowAt(PRODUCTION_KEY_RATE, T - 1).startMs, T - 1000);
});

test('a first-request window runs 60 s from its opening; its key carries its number and start', () => {
  const w = openedWindow(DEV_KEY_RATE, 3, T + 123);
  assert.equal(w, { key: `3@${T + 123}`, startMs: T + 123, endMs: T + 60_123 });
  assert.ok(windowRuns(w, T + 123));
  assert.ok(windowRuns(w, T + 60_122));
  assert.not.ok(windowRuns(w, T + 60_123));
  assert.ok(windowRuns(w, T - 5_000), 'a clock set back stays in the current window');
  assert.is.not(openedWindow(DEV_KEY_RATE, 3, T).key, openedWindow(DEV_KEY_RATE, 3, T + 1).key);
});

test('Retry-After is the whole seconds left, rounded up, at least 1', () => {
  const w = { startMs: T, endMs: T + 60_000 };
  assert.is(retryAfterSeconds(w, T), 60);
  assert.is(retryAfterSeconds(w, T + 20_000), 40);
  assert.is(retryAfterSeconds(w, T + 19_999), 41);
  assert.is(retryAfterSeconds(w, T + 59_999), 1);
  assert.is(retryAfterSeconds(w, T + 60_000), 1);
  assert.is(resetSeconds(w, T + 59_999), 1);
  assert.is(resetSeconds(w, T + 60_000), 0);
  assert.is(resetSeconds(w, T + 61_000), 0);
});

test('given a window opened at T, when a clock a little behind (within the skew tolerance) asks, then it is in that window, and Retry-After and reset are at most its length', () => {
  const w = openedWindow(DEV_KEY_RATE, 3, T);
  assert.ok(windowRuns(w, T - CLOCK_SKEW_TOLERANCE_MS));
  assert.is(retryAfterSeconds(w, T - 5_000), 60);
  assert.is(resetSeconds(w, T - 5_000), 60);
});

test('given a window opened at T, when the clock is stepped back an hour, then the window does not run (the next one opens) and no wait names the step', () => {
  const w = openedWindow(DEV_KEY_RATE, 3, T);
  assert.not.ok(windowRuns(w, T - CLOCK_SKEW_TOLERANCE_MS - 1));
  assert.not.ok(windowRuns(w, T - 3_600_000 + 61_000));
  assert.is(retryAfterSeconds(w, T - 3_600_000), 60);
  assert.is(resetSeconds(w, T - 3_600_000), 60);
  const second = clockWindowAt(PRODUCTION_KEY_RATE, T);
  assert.is(retryAfterSeconds(second, T - 3_600_000), 1, 'a clock window as well: at most one second');
});

test('RateLimit-Policy and RateLimit in the IETF draft\'s structured-field form', () => {
  const headers = rateLimitHeaders([
    { policy: DEV_KEY_RATE, remaining: 14, reset: 60 },
    { policy: WORKSPACE_RATE, remaining: -3, reset: 1 },
  ]);
  assert.equal(headers, {
    'ratelimit-policy': '"dev-key";q=15;w=60, "workspace";q=200;w=1',
    ratelimit: '"dev-key";r=14;t=60, "workspace";r=0;t=1',
  });
});

test('the 429 message states the wait in seconds', () => {
  assert.is(rateLimitedMessage(42), 'rate limit exceeded: retry in 42 seconds');
  assert.is(rateLimitedMessage(1), 'rate limit exceeded: retry in 1 second');
});

test.run();
