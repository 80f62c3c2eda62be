// RELAY_TRUST_PROXY: behind a reverse proxy, the per-address sign-in throttle counts the client the
// proxy names in X-Forwarded-For, not the proxy; without it, the header is ignored, so a client
// cannot pick the address it is counted under, nor by the port a proxy writes with it. Real HTTP: the peer of every request is 127.0.0.1.
import * as assert from 'uvu/assert';
import { suite } from 'uvu';
import { ADDRESS_THROTTLE } from '../domain/sign-in-throttle.ts';
import { ConfigError, loadConfig } from '../infra/config.ts';
import { startTestApp, type TestApp } from './support/app.ts';

const WRONG = 'not the password at all';
let accounts = 0;
const freshEmail = () => `user${++accounts}@proxy.test`;

async function signIn(t: TestApp, forwardedFor: string): Promise<number> {
  const response = await fetch(`${t.url}/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
    body: JSON.stringify({ email: freshEmail(), password: WRONG }),
  });
  await response.arrayBuffer();
  return response.status;
}

/** Started with a stopped clock: a refusal (held about a second before it is answered) must not outlast the wait it reports. */
async function start(env: Record<string, string>): Promise<TestApp> {
  const t = await startTestApp(env, { listen: true });
  t.clock.freeze();
  return t;
}

/** Fails every free attempt of one address (each on an account of its own), so that its next one waits. */
async function exhaust(t: TestApp, forwardedFor: (i: number) => string): Promise<void> {
  for (let i = 0; i < ADDRESS_THROTTLE.freeFailures + 1; i++) assert.is(await signIn(t, forwardedFor(i)), 401, `failure ${i + 1}`);
}

const test = suite('RELAY_TRUST_PROXY');

test('a trusted proxy: each client it names is counted on its own', async () => {
  const t = await start({ RELAY_TRUST_PROXY: '127.0.0.1' });
  try {
    await exhaust(t, () => '203.0.113.7');
    assert.is(await signIn(t, '203.0.113.7'), 429, 'the client that failed waits');
    assert.is(await signIn(t, '203.0.113.8'), 401, 'another client behind the same proxy does not');
  } finally {
    await t.close();
  }
});

test('a trusted proxy: what a client writes into X-Forwarded-For itself does not change whom it is counted as', async () => {
  const t = await start({ RELAY_TRUST_PROXY: '127.0.0.0/8' });
  try {
    // The proxy appends the address it saw; the client controls only what comes before it.
    await exhaust(t, (i) => `198.51.100.${i + 1}, 203.0.113.9`);
    assert.is(await signIn(t, '198.51.100.200, 203.0.113.9'), 429, 'counted as the address the proxy saw');
    assert.is(await signIn(t, '198.51.100.200, 203.0.113.10'), 401, 'the same forged prefix from another client is not');
  } finally {
    await t.close();
  }
});

test('a trusted proxy that writes the client with its port ("a.b.c.d:port", "[v6]:port"): one client is one address, whatever its ports', async () => {
  const t = await start({ RELAY_TRUST_PROXY: '127.0.0.1' });
  try {
    await exhaust(t, (i) => `203.0.113.7:${40000 + i}`);
    assert.is(await signIn(t, '203.0.113.7:50000'), 429, 'the same client from a new port waits');
    assert.is(await signIn(t, '203.0.113.8:40000'), 401, 'another client does not');
    await exhaust(t, (i) => `[2001:db8:1:2::${i + 1}]:${40000 + i}`);
    assert.is(await signIn(t, '[2001:db8:1:2::ff]:50000'), 429, 'counted by its /64, the port dropped');
  } finally {
    await t.close();
  }
});

test('a trusted proxy that names clients by what is no address: all such count as one, however spelled', async () => {
  const t = await start({ RELAY_TRUST_PROXY: '127.0.0.1' });
  try {
    await exhaust(t, (i) => `unknown-${i}`);
    assert.is(await signIn(t, 'another spelling'), 429);
  } finally {
    await t.close();
  }
});

test('no trusted proxy (the default): X-Forwarded-For is ignored and the peer is counted', async () => {
  const t = await start({});
  try {
    await exhaust(t, (i) => `203.0.113.${i + 1}`);
    assert.is(await signIn(t, '203.0.113.250'), 429, 'every attempt counted against 127.0.0.1');
  } finally {
    await t.close();
  }
});

test('only addresses and CIDR ranges are accepted', () => {
  assert.equal(loadConfig({ RELAY_TRUST_PROXY: '10.0.0.0/8, 192.0.2.1,::1' }).trustProxy, ['10.0.0.0/8', '192.0.2.1', '::1']);
  assert.equal(loadConfig({}).trustProxy, []);
  for (const bad of ['proxy.example', '10.0.0.0/33', '::1/129', '10.0.0.1/8/8']) {
    assert.throws(() => loadConfig({ RELAY_TRUST_PROXY: bad }), (error: Error) => error instanceof ConfigError && error.variable === 'RELAY_TRUST_PROXY' && error.message.includes(`"${bad}"`), bad);
  }
});

test.run();
