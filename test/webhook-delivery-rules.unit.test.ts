// Given/when/then tests of the webhook delivery rules (domain/webhooks/delivery.ts) and of the
// event metadata helpers (domain/events/metadata.ts).
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { originOfEvent, originOfRequest, schemaVersionOf } from '../domain/events/metadata.ts';
import { WEBHOOK_POLICY, afterAttempt, scaleWebhookPolicy } from '../domain/webhooks/delivery.ts';

const AT = new Date('2026-11-01T10:00:00.000Z');
const later = (ms: number) => new Date(AT.getTime() + ms).toISOString();

const rules = suite('webhook delivery rules');

rules('given a 2xx, then succeeded with nothing more due; 199 and 300 are not', () => {
  for (const status of [200, 204, 299]) assert.equal(afterAttempt(1, { httpStatus: status, errorCode: null }, AT, WEBHOOK_POLICY), { status: 'succeeded', nextAttemptAt: null });
  for (const status of [199, 300, 302, 500]) assert.is(afterAttempt(1, { httpStatus: status, errorCode: null }, AT, WEBHOOK_POLICY).status, 'pending', String(status));
  assert.is(afterAttempt(1, { httpStatus: 200, errorCode: 'timeout' }, AT, WEBHOOK_POLICY).status, 'pending', 'an error code is no success');
  assert.is(afterAttempt(1, { httpStatus: null, errorCode: null }, AT, WEBHOOK_POLICY).status, 'pending', 'no response is no success');
});

rules('given failures, then retries after 1 min, 5 min, 15 min, 1 h, 6 h and 24 h, and the seventh failure is final', () => {
  const due = WEBHOOK_POLICY.retryDelaysMs.map((_, i) => afterAttempt(i + 1, { httpStatus: 500, errorCode: 'http_error' }, AT, WEBHOOK_POLICY).nextAttemptAt);
  assert.equal(due, [later(60_000), later(300_000), later(900_000), later(3_600_000), later(21_600_000), later(86_400_000)]);
  assert.equal(afterAttempt(7, { httpStatus: 500, errorCode: 'http_error' }, AT, WEBHOOK_POLICY), { status: 'failed', nextAttemptAt: null });
  assert.is(afterAttempt(6, { httpStatus: 302, errorCode: 'redirect' }, AT, WEBHOOK_POLICY).status, 'pending', 'a redirect is retried');
});

rules('given an unsafe destination, then failed at once, whatever the attempt', () => {
  assert.equal(afterAttempt(1, { httpStatus: null, errorCode: 'unsafe_destination' }, AT, WEBHOOK_POLICY), { status: 'failed', nextAttemptAt: null });
});

rules('given a scaled policy (RELAY_WEBHOOK_RETRY_SCALE), then the delays shrink and the lease stays', () => {
  const scaled = scaleWebhookPolicy(WEBHOOK_POLICY, 0.001);
  assert.equal(scaled.retryDelaysMs, [60, 300, 900, 3_600, 21_600, 86_400]);
  assert.is(scaled.attemptLeaseMs, WEBHOOK_POLICY.attemptLeaseMs);
  assert.is(afterAttempt(1, { httpStatus: 503, errorCode: 'http_error' }, AT, scaled).nextAttemptAt, later(60));
  assert.is(WEBHOOK_POLICY.attemptLeaseMs, 20_000);
});

rules.run();

const metadata = suite('event metadata');

metadata('a request is its own correlation and cause; an event passes its correlation on and is the cause', () => {
  assert.equal(originOfRequest('req-1'), { correlationId: 'req-1', causationId: 'req-1' });
  assert.equal(originOfEvent({ id: 'evt-2', metadata: { correlationId: 'req-1' } }), { correlationId: 'req-1', causationId: 'evt-2' });
  assert.equal(originOfEvent({ id: 'evt-2' }), { correlationId: 'evt-2', causationId: 'evt-2' }, 'an event without one starts a chain');
  assert.equal(originOfEvent({ id: 'evt-2', metadata: { correlationId: 7 } }), { correlationId: 'evt-2', causationId: 'evt-2' });
});

metadata('schema versions: a positive safe integer, else 1 (events from before versions)', () => {
  assert.is(schemaVersionOf({ schemaVersion: 3 }), 3);
  assert.is(schemaVersionOf({ schemaVersion: 1 }), 1);
  for (const value of [undefined, 0, -2, 1.5, '2', Number.MAX_SAFE_INTEGER + 2]) assert.is(schemaVersionOf({ schemaVersion: value }), 1, String(value));
  assert.is(schemaVersionOf(undefined), 1);
});

metadata.run();
