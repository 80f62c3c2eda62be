// The shared request validation and error envelope, through fastify's inject.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import Fastify from 'fastify';
import { Type } from '@sinclair/typebox';
import { installTypeBoxValidation } from '../apps/api/validation.ts';
import { errorAnswerOf, registerErrorHandling, type ErrorAnswer } from '../apps/api/error-registry.ts';
import { RelayError } from '../domain/errors.ts';

const test = suite('request validation');

const app = Fastify();
installTypeBoxValidation(app);
registerErrorHandling(app);
app.get('/q', { schema: { querystring: Type.Object({ limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })), flag: Type.Optional(Type.Boolean()) }, { additionalProperties: false }) } }, async (request) => request.query);
app.get('/d', { schema: { querystring: Type.Object({ at: Type.String({ format: 'date-time' }) }) } }, async (request) => request.query);
app.post('/b', { schema: { body: Type.Object({ subject: Type.String() }, { additionalProperties: false }) } }, async (request) => request.body);
app.get('/boom', async () => {
  throw new Error('secret internals');
});
app.get('/limited', async () => {
  throw new RelayError('rate_limit_exceeded', 'too many requests for this key', { retryAfterSeconds: 3 });
});
/** Every error a route ended with, as the error handler was given it. */
const handled: unknown[] = [];
app.addHook('onError', async (_request, _reply, error) => {
  handled.push(error);
});

test.after(() => app.close());

test('canonical decimal query values become numbers; booleans from true/false', async () => {
  const response = await app.inject({ url: '/q?limit=42&flag=true' });
  assert.is(response.statusCode, 200);
  assert.equal(response.json(), { limit: 42, flag: true });
});

for (const bad of ['1.5', '0x10', '1e1', ' 7', 'abc', '', '007']) {
  test(`limit=${JSON.stringify(bad)} is a 400 validation_error naming the field`, async () => {
    const response = await app.inject({ url: `/q?limit=${encodeURIComponent(bad)}` });
    assert.is(response.statusCode, 400);
    assert.is(response.json().error.code, 'validation_error');
    assert.match(response.json().error.message, /query\.limit/);
  });
}

test('date-time query values must be real RFC 3339 instants', async () => {
  const ok = await app.inject({ url: '/d?at=2026-02-28T23:59:59.5%2B02:00' });
  assert.is(ok.statusCode, 200);
  for (const bad of ['2026-02-30T00:00:00Z', '2026-13-01T00:00:00Z', '2026-01-01', '2026-01-01T25:00:00Z', 'yesterday']) {
    const response = await app.inject({ url: `/d?at=${encodeURIComponent(bad)}` });
    assert.is(response.statusCode, 400, bad);
    assert.match(response.json().error.message, /query\.at/);
  }
});

test('an unknown query parameter is refused', async () => {
  const response = await app.inject({ url: '/q?other=1' });
  assert.is(response.statusCode, 400);
  assert.is(response.json().error.code, 'validation_error');
});

test('a body is not coerced: a number is not a string', async () => {
  const response = await app.inject({ method: 'POST', url: '/b', payload: { subject: 5 } });
  assert.is(response.statusCode, 400);
  assert.match(response.json().error.message, /body\.subject/);
});

test('malformed JSON, and a body that is not JSON, are 400 validation_error in the envelope', async () => {
  const malformed = await app.inject({ method: 'POST', url: '/b', headers: { 'content-type': 'application/json' }, payload: '{"subject":' });
  assert.is(malformed.statusCode, 400);
  assert.is(malformed.json().error.code, 'validation_error');
  const text = await app.inject({ method: 'POST', url: '/b', headers: { 'content-type': 'text/plain' }, payload: 'hello' });
  assert.is(text.statusCode, 400);
  assert.is(text.json().error.code, 'validation_error');
});

test('an unexpected error is a 500 internal_error without internals; unknown routes are 404 in the envelope', async () => {
  const boom = await app.inject({ url: '/boom' });
  assert.is(boom.statusCode, 500);
  assert.equal(boom.json(), { error: { code: 'internal_error', message: 'internal server error' } });
  const missing = await app.inject({ url: '/nowhere' });
  assert.is(missing.statusCode, 404);
  assert.is(missing.json().error.code, 'not_found');
});

test('the answer a client gets is errorAnswerOf the error (what the admission metrics count)', async () => {
  const requests = [
    { url: '/q?limit=0' },
    { method: 'POST' as const, url: '/b', headers: { 'content-type': 'application/json' }, payload: '{"subject":' },
    { method: 'POST' as const, url: '/b', headers: { 'content-type': 'text/plain' }, payload: 'hello' },
    { url: '/limited' },
    { url: '/boom' },
  ];
  const seen: Array<{ answered: ErrorAnswer; counted: ErrorAnswer }> = [];
  for (const request of requests) {
    handled.length = 0;
    const response = await app.inject(request);
    assert.is(handled.length, 1, request.url);
    const retryAfter = response.headers['retry-after'];
    seen.push({
      answered: { status: response.statusCode, code: response.json().error.code, message: response.json().error.message, ...(retryAfter ? { retryAfterSeconds: Number(retryAfter) } : {}) },
      counted: errorAnswerOf(handled[0]),
    });
  }
  for (const { answered, counted } of seen) assert.equal(counted, answered);
  assert.equal(seen.map((s) => `${s.answered.status} ${s.answered.code}`), ['400 validation_error', '400 validation_error', '400 validation_error', '429 rate_limit_exceeded', '500 internal_error']);
  assert.is(seen[3].answered.retryAfterSeconds, 3);
});

test.run();
