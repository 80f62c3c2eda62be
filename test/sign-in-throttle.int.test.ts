// Sign-in throttling through POST /v1/session: per account (the email as typed, whether or not
// it has a user) and per client address (for IPv6, per /64), with waits that grow; the same answers for accounts
// that exist and those that do not; the counts shared by every API process through the
// document store (embedded: two APIs on one data directory; distributed: two on one FerretDB
// database, when RELAY_MONGODB_URL is set).
import { randomBytes } from 'node:crypto';
import type { LightMyRequestResponse } from 'fastify';
import { MongoClient } from 'mongodb';
import * as assert from 'uvu/assert';
import { startRetention } from '../apps/pipeline/retention.ts';
import { COLLECTIONS } from '../apps/services/collections.ts';
import { ACCOUNT_THROTTLE } from '../domain/sign-in-throttle.ts';
import { createTestClock, startTestApp, type TestApp } from './support/app.ts';
import { newCaller, PASSWORD } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { distributedSkipReason } from './support/templates.ts';

interface Context { a: TestApp; b: TestApp; close(): Promise<void> }

const WRONG = 'not the password at all';

// Each test signs in from addresses of its own, unless it says otherwise: the address counts too.
let addresses = 0;
let testAddress = '';
const freshAddress = () => `10.${Math.floor(++addresses / 250)}.${addresses % 250}.1`;

function signIn(t: TestApp, email: string, password: string, address = testAddress): Promise<LightMyRequestResponse> {
  return t.app.inject({ method: 'POST', url: '/v1/session', payload: { email, password }, remoteAddress: address });
}

/** What a client sees of an answer: status, code, message and Retry-After. */
function seen(response: LightMyRequestResponse): string {
  const body = response.json() as { error?: { code: string; message: string } };
  return `${response.statusCode} ${body.error ? `${body.error.code}: ${body.error.message}` : 'signed in'}${response.headers['retry-after'] ? ` (Retry-After ${response.headers['retry-after']})` : ''}`;
}

let accounts = 0;
const freshEmail = () => `user${++accounts}@throttle.test`;

function throttleSuite(mode: string, open: () => Promise<Context>, skipReason?: string): void {
  const test = skippableSuite<Context>(`sign-in throttling [${mode}]`, skipReason);

  test.before(async (ctx) => {
    Object.assign(ctx, await open());
    // Both APIs read one clock (open() gives them the same), stopped, so that waits are crossed by moving it.
    ctx.a.clock.freeze();
  });
  test.before.each(() => {
    testAddress = freshAddress();
  });
  test.after(async (ctx) => ctx.close());

  test('an account: five wrong passwords are answered 401, then each wait doubles (1 s, 2 s, 4 s); even the right password waits; 429 states the wait and sets Retry-After', async (ctx) => {
    const email = freshEmail();
    await newCaller(ctx.a, email);
    for (let i = 1; i <= 6; i++) assert.is(seen(await signIn(ctx.a, email, WRONG)), '401 invalid_credentials: email or password is incorrect', `failure ${i}`);
    assert.is(seen(await signIn(ctx.a, email, PASSWORD)), '429 rate_limit_exceeded: too many failed sign-ins: retry in 1 second (Retry-After 1)');
    ctx.a.clock.advance(1000);
    assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 401, 'the wait is over');
    assert.is(seen(await signIn(ctx.a, email, WRONG)), '429 rate_limit_exceeded: too many failed sign-ins: retry in 2 seconds (Retry-After 2)');
    ctx.a.clock.advance(1000);
    assert.is(seen(await signIn(ctx.a, email, WRONG)), '429 rate_limit_exceeded: too many failed sign-ins: retry in 1 second (Retry-After 1)', 'refused attempts do not push the wait further');
    ctx.a.clock.advance(1000);
    assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 401);
    assert.is(seen(await signIn(ctx.a, email, PASSWORD)), '429 rate_limit_exceeded: too many failed sign-ins: retry in 4 seconds (Retry-After 4)');
    ctx.a.clock.advance(4000);
    assert.is((await signIn(ctx.a, email, PASSWORD)).statusCode, 200, 'the right password once the wait is over');
  });

  test('an account that does not exist gets exactly the answers one that exists gets', async (ctx) => {
    const known = freshEmail();
    await newCaller(ctx.a, known);
    const unknown = freshEmail();
    const answers = async (email: string) => {
      const out: string[] = [];
      for (let i = 0; i < 8; i++) out.push(seen(await signIn(ctx.a, email, WRONG)));
      return out;
    };
    const forKnown = await answers(known);
    const forUnknown = await answers(unknown);
    assert.equal(forUnknown, forKnown);
    assert.ok(forKnown.some((a) => a.startsWith('429')), forKnown.join('\n'));
  });

  test('a successful sign-in clears its account\'s failures', async (ctx) => {
    const email = freshEmail();
    await newCaller(ctx.a, email);
    for (let i = 0; i < 5; i++) assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 401);
    assert.is((await signIn(ctx.a, email, PASSWORD)).statusCode, 200);
    for (let i = 0; i < 5; i++) assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 401, `counting starts again: ${i + 1}`);
  });

  test('a client address: twenty wrong sign-ins over twenty accounts, then it waits for any account; another address does not', async (ctx) => {
    const address = '198.51.100.23';
    for (let i = 0; i < 21; i++) assert.is((await signIn(ctx.a, freshEmail(), WRONG, address)).statusCode, 401, `failure ${i + 1}`);
    const email = freshEmail();
    await newCaller(ctx.a, email);
    assert.is(seen(await signIn(ctx.a, email, PASSWORD, address)), '429 rate_limit_exceeded: too many failed sign-ins: retry in 1 second (Retry-After 1)');
    assert.is((await signIn(ctx.a, email, PASSWORD, '198.51.100.24')).statusCode, 200);
    assert.is((await signIn(ctx.a, email, PASSWORD, address)).statusCode, 429, 'a success elsewhere does not clear the address');
  });

  test('IPv6: the addresses of one /64 count as one client (any host on it picks from 2^64), another /64 does not; an IPv4-mapped address counts as its IPv4 address', async (ctx) => {
    for (let i = 0; i < 21; i++) assert.is((await signIn(ctx.a, freshEmail(), WRONG, `2001:db8:bbbb:1::${(i + 1).toString(16)}`)).statusCode, 401, `failure ${i + 1}`);
    const email = freshEmail();
    await newCaller(ctx.a, email);
    assert.is(seen(await signIn(ctx.a, email, PASSWORD, '2001:db8:bbbb:1:ffff:ffff:ffff:fffe')), '429 rate_limit_exceeded: too many failed sign-ins: retry in 1 second (Retry-After 1)');
    assert.is((await signIn(ctx.a, email, PASSWORD, '2001:db8:bbbb:2::1')).statusCode, 200, 'the next /64 is another client');

    for (let i = 0; i < 11; i++) assert.is((await signIn(ctx.a, freshEmail(), WRONG, '198.51.100.77')).statusCode, 401);
    for (let i = 0; i < 10; i++) assert.is((await signIn(ctx.a, freshEmail(), WRONG, '::ffff:198.51.100.77')).statusCode, 401);
    assert.is((await signIn(ctx.a, email, PASSWORD, '::ffff:c633:644d')).statusCode, 429, 'the IPv4 address 198.51.100.77, however a dual-stack socket spells it');
  });

  test('failures counted by one API process lock the account in another', async (ctx) => {
    const email = freshEmail();
    await newCaller(ctx.a, email);
    for (let i = 0; i < 3; i++) assert.is((await signIn(ctx.a, email, WRONG, `192.0.2.${i}`)).statusCode, 401);
    for (let i = 3; i < 6; i++) assert.is((await signIn(ctx.b, email, WRONG, `192.0.2.${i}`)).statusCode, 401);
    assert.is((await signIn(ctx.a, email, PASSWORD, '192.0.2.9')).statusCode, 429);
    assert.is((await signIn(ctx.b, email, PASSWORD, '192.0.2.9')).statusCode, 429);
  });

  test('parallel wrong sign-ins through two processes: the five free ones and one more are checked, the others wait', async (ctx) => {
    const email = freshEmail();
    await newCaller(ctx.a, email);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => signIn(i % 2 ? ctx.b : ctx.a, email, WRONG, `192.0.2.${100 + i}`)));
    assert.equal(answers.map((r) => r.statusCode).sort(), [...Array(6).fill(401), ...Array(4).fill(429)]);
    assert.is(seen(await signIn(ctx.a, email, PASSWORD, '192.0.2.200')), '429 rate_limit_exceeded: too many failed sign-ins: retry in 1 second (Retry-After 1)');
    ctx.a.clock.advance(1000);
    assert.is((await signIn(ctx.b, email, PASSWORD, '192.0.2.200')).statusCode, 200);
  });

  test('a day after their last failure the counts are forgotten, and the retention sweep deletes them', async (ctx) => {
    const email = freshEmail();
    for (let i = 0; i < 7; i++) await signIn(ctx.a, email, WRONG);
    assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 429);
    const throttles = ctx.a.stores.documents.collection(COLLECTIONS.signInThrottles);
    const before = await throttles.count();
    ctx.a.clock.advance(ACCOUNT_THROTTLE.forgetAfterMs);
    assert.is((await signIn(ctx.a, email, WRONG)).statusCode, 401, 'forgotten: counting from one again');
    ctx.a.clock.advance(ACCOUNT_THROTTLE.forgetAfterMs);
    const retention = await startRetention({
      documents: ctx.a.stores.documents, events: ctx.a.stores.events, deliveryPolicy: ctx.a.ctx.services.policies.delivery, now: () => ctx.a.clock.now(),
    });
    await retention.stop();
    assert.ok(before >= 2);
    assert.is(await throttles.count(), 0);
  });

  test.run();
}

throttleSuite('embedded', async () => {
  const clock = createTestClock();
  const a = await startTestApp({}, { clock });
  const b = await startTestApp({}, { dataDir: a.config.dataDir, clock });
  return { a, b, close: async () => { await b.close(); await a.close(); } };
});

const baseUrl = process.env.RELAY_MONGODB_URL?.trim();
throttleSuite('distributed', async () => {
  const url = new URL(baseUrl!);
  const database = `relay_throttle_${randomBytes(6).toString('hex')}`;
  url.pathname = `/${database}`;
  const clock = createTestClock();
  const a = await startTestApp({ RELAY_MONGODB_URL: url.toString() }, { clock });
  const b = await startTestApp({ RELAY_MONGODB_URL: url.toString() }, { clock });
  return {
    a, b,
    close: async () => {
      await b.close();
      await a.close();
      const admin = await MongoClient.connect(baseUrl!);
      try {
        await admin.db(database).dropDatabase();
      } finally {
        await admin.close();
      }
    },
  };
}, distributedSkipReason());
