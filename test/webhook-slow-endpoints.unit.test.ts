// The slow-endpoint rule of the webhooks dispatcher (apps/services/webhooks/slow-endpoints.ts):
// which requests make an endpoint slow and which make it fast again, the bound the dispatcher
// reads (0 for a slow endpoint only while slow endpoints hold their share of the requests in
// flight), which endpoints a read of the schedule leaves out, and the bounded memory.
import { test } from 'uvu';
import * as assert from 'uvu/assert';
import { ATTEMPT_TIME_LIMIT_MS } from '../apps/services/webhooks/attempt.ts';
import { MAX_SLOW_ENDPOINTS, SLOW_REQUEST_MS, SlowEndpoints } from '../apps/services/webhooks/slow-endpoints.ts';
import type { AttemptResult } from '../infra/ports/http-egress.ts';

const result = (durationMs: number, errorCode: AttemptResult['errorCode'] = null): AttemptResult =>
  ({ httpStatus: errorCode === null ? 200 : null, errorCode, durationMs, responseSnippet: null });

test('a request that timed out or took a third of the time limit makes its endpoint slow; one that ended sooner makes it fast again', () => {
  assert.is(SLOW_REQUEST_MS, ATTEMPT_TIME_LIMIT_MS / 3);
  const slow = new SlowEndpoints({ share: 2, perEndpoint: 4 });
  slow.requestEnded('a', result(SLOW_REQUEST_MS - 1));
  assert.not.ok(slow.isSlow('a'), 'just under a third');
  slow.requestEnded('a', result(SLOW_REQUEST_MS));
  assert.ok(slow.isSlow('a'), 'a third');
  slow.requestEnded('b', result(20, 'timeout'));
  assert.ok(slow.isSlow('b'), 'a timeout, however it was timed');
  slow.requestEnded('b', result(40, 'http_error'));
  assert.not.ok(slow.isSlow('b'), 'a fast answer, even a failure, ends it');
  assert.is(slow.count, 1);
});

test('a slow endpoint\'s bound is 0 only while slow endpoints hold their share; other endpoints keep theirs', () => {
  const slow = new SlowEndpoints({ share: 2, perEndpoint: 4 });
  slow.requestEnded('s1', result(0, 'timeout'));
  slow.requestEnded('s2', result(0, 'timeout'));
  slow.started('s1');
  slow.started('fast');
  slow.started('fast');
  assert.is(slow.slowInFlight(), 1);
  assert.is(slow.bound('s2'), 4, 'below the share');
  slow.started('s2');
  assert.ok(slow.saturated());
  assert.is(slow.bound('s1'), 0);
  assert.is(slow.bound('s2'), 0);
  assert.is(slow.bound('fast'), 4);
  assert.is(slow.bound('unknown'), 4);
  slow.ended('s1');
  assert.is(slow.bound('s2'), 4, 'a slot of the share is free again');
  // s2 answers fast while its request of before is in flight: it is no longer slow, so its request no longer counts.
  slow.started('s1');
  assert.ok(slow.saturated());
  slow.requestEnded('s2', result(10));
  assert.not.ok(slow.saturated());
  assert.is(slow.slowInFlight(), 1);
});

test('while slow endpoints hold their share, the slow endpoints a read found are left out of the next reads; once they do not, none is', () => {
  const slow = new SlowEndpoints({ share: 1, perEndpoint: 4 });
  for (const id of ['s1', 's2', 's3']) slow.requestEnded(id, result(0, 'timeout'));
  const full = new Set(['at-bound']);
  slow.read(['s2', 'fast']);
  assert.is(slow.leftOut(full), full, 'not saturated: a read remembers nothing');
  slow.started('s1');
  slow.read(['s2', 'fast', 's2']);
  assert.equal([...slow.leftOut(full)].sort(), ['at-bound', 's2']);
  slow.requestEnded('s2', result(5));
  assert.equal([...slow.leftOut(full)], ['at-bound'], 'fast again: read again');
  slow.read(['s3']);
  assert.equal([...slow.leftOut(full)].sort(), ['at-bound', 's3']);
  slow.ended('s1');
  assert.is(slow.leftOut(full), full);
  slow.started('s1');
  assert.is(slow.leftOut(full), full, 'forgotten once the share was free');
});

test('at most MAX_SLOW_ENDPOINTS are remembered: the one whose slow request ended longest ago is forgotten first', () => {
  const slow = new SlowEndpoints({ share: 32, perEndpoint: 4 });
  for (let i = 0; i < MAX_SLOW_ENDPOINTS; i++) slow.requestEnded(`ep${i}`, result(0, 'timeout'));
  slow.requestEnded('ep0', result(0, 'timeout'));
  slow.requestEnded('one-more', result(0, 'timeout'));
  assert.is(slow.count, MAX_SLOW_ENDPOINTS);
  assert.ok(slow.isSlow('ep0'), 'slow again lately');
  assert.not.ok(slow.isSlow('ep1'), 'the oldest is forgotten');
  assert.ok(slow.isSlow('one-more'));
});

test.run();
