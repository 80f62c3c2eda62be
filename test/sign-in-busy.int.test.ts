// A sign-in while password hashing is busy is answered 503, and only that one: an unknown email
// must then be answered as a known one again (401 after the same work). The first unknown email
// makes the stand-in hash it is checked against; refused while the queue was full, that hash
// must not be kept, or every unknown email would be answered 503 at once from then on (which
// emails have accounts would show, and unknown ones would never be counted by the throttle).
// A process of its own: the stand-in hash is made once per process.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { hashPassword, verifyPassword } from '../apps/services/management/passwords.ts';
import { MAX_WAITING_HASHES } from '../infra/secrets/scrypt-thread.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { newCaller } from './support/management.ts';

const test = suite<{ t: TestApp }>('sign-in while hashing is busy');

test.before(async (ctx) => { ctx.t = await startTestApp(); });
test.after(async (ctx) => ctx.t.close());

const signIn = (t: TestApp, email: string, remoteAddress: string) =>
  t.app.inject({ method: 'POST', url: '/v1/session', payload: { email, password: 'wrong password here' }, remoteAddress });

test('after hashing was busy once, unknown emails answer like known ones again (401 invalid_credentials)', async ({ t }) => {
  await newCaller(t, 'known@review.test');
  // Fill the hashing queue: one running, MAX_WAITING_HASHES waiting.
  const hash = await hashPassword('a password long enough');
  const fill = Promise.all(Array.from({ length: MAX_WAITING_HASHES + 1 }, () => verifyPassword('x', hash).catch(() => false)));
  const busy = await signIn(t, 'nobody1@review.test', '10.9.0.1');
  assert.is(busy.statusCode, 503, 'busy while the queue is full (expected, transient)');
  await fill; // the queue has drained

  const known = await signIn(t, 'known@review.test', '10.9.0.2');
  assert.is(known.statusCode, 401, 'known email, wrong password');
  const unknown = await signIn(t, 'nobody2@review.test', '10.9.0.3');
  assert.is(unknown.statusCode, 401, `unknown email answered ${unknown.statusCode} ${unknown.body}: not the same answer as a known email`);
});

test.run();
