// Sign-in throttling (domain/sign-in-throttle.ts) when a failure is dated after the clock that
// reads it: the host's clock stepped back (an NTP correction), or another API process's clock
// ahead. A free failure (the first five of an account, twenty of an address) costs no wait, and
// no wait is ever longer than the delay the failures earned, whatever the step.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createTestClock, startTestApp, type TestApp } from './support/app.ts';
import { newCaller, PASSWORD } from './support/management.ts';

const test = suite<{ t: TestApp }>('sign-in after a clock step back');

test.before(async (ctx) => {
  ctx.t = await startTestApp();
  ctx.t.clock.freeze();
});
test.after(async ({ t }) => t.close());

const signIn = (t: TestApp, email: string, password: string, address: string) =>
  t.app.inject({ method: 'POST', url: '/v1/session', payload: { email, password }, remoteAddress: address });

test('one wrong password, clock stepped back an hour: the right password is accepted', async ({ t }) => {
  const email = 'ann@clock.test';
  await newCaller(t, email);
  assert.is((await signIn(t, email, 'typo', '10.9.9.1')).statusCode, 401);
  t.clock.advance(-60 * 60_000); // NTP steps the clock back one hour
  const r = await signIn(t, email, PASSWORD, '10.9.9.1');
  assert.is(r.statusCode, 200, `${r.statusCode} ${r.body} Retry-After ${r.headers['retry-after']}`);
});

test('another user behind the same address (no failure of their own) is not locked out either', async ({ t }) => {
  const email = 'bob@clock.test';
  await newCaller(t, email);
  t.clock.advance(60 * 60_000);
  assert.is((await signIn(t, 'someone@clock.test', 'typo', '10.9.9.2')).statusCode, 401);
  t.clock.advance(-10 * 60_000); // stepped back ten minutes
  const r = await signIn(t, email, PASSWORD, '10.9.9.2');
  assert.is(r.statusCode, 200, `${r.statusCode} ${r.body} Retry-After ${r.headers['retry-after']}`);
});

test('two API processes whose clocks differ by 5 s: a typo on one, the right password on the other is accepted', async ({ t }) => {
  // A second API on the same data directory, its clock 5 s behind the first's (no NTP is perfect).
  const behind = createTestClock();
  behind.freeze(new Date(t.clock.now().getTime() - 5_000));
  const other = await startTestApp({}, { dataDir: t.config.dataDir, clock: behind });
  try {
    const email = 'cy@clock.test';
    await newCaller(t, email);
    assert.is((await signIn(t, email, 'typo', '10.9.9.3')).statusCode, 401);
    const r = await signIn(other, email, PASSWORD, '10.9.9.3');
    assert.is(r.statusCode, 200, `${r.statusCode} ${r.body} Retry-After ${r.headers['retry-after']}`);
  } finally {
    await other.close();
  }
});

test.run();
