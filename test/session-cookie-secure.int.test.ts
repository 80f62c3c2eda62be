// The session cookie's Secure flag follows the dashboard's origin: a dashboard configured at an
// https origin gets a Secure cookie even outside production (a browser must never send the
// session over plain http there); one at a plain-http origin in development gets none, or a
// dashboard on http://localhost could not keep a session. Production is Secure whatever
// (test/management-authz.int.test.ts). Real sign-ins and sign-outs over HTTP.
import { suite } from 'uvu';
import * as assert from 'uvu/assert';
import { createUser } from '../apps/services/management/users.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { PASSWORD } from './support/management.ts';

const attributesOf = (line: string) => line.split(';').slice(1).map((part) => part.trim().toLowerCase());

/** Signs in as a browser at `origin` would, then signs out; both Set-Cookie lines of the session cookie. */
async function signInAndOut(t: TestApp, origin: string, email: string): Promise<{ signIn: string; signOut: string }> {
  await createUser(t.ctx.documents, { email, password: PASSWORD }, t.ctx.now());
  const login = await fetch(`${t.url}/v1/session`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin },
    body: JSON.stringify({ email, password: PASSWORD }),
  });
  assert.is(login.status, 200, await login.clone().text());
  const [signIn] = login.headers.getSetCookie().filter((line) => line.startsWith('rr_session='));
  assert.ok(signIn, `no rr_session cookie in ${JSON.stringify(login.headers.getSetCookie())}`);
  const logout = await fetch(`${t.url}/v1/session`, { method: 'DELETE', headers: { origin, cookie: signIn.split(';')[0] } });
  assert.is(logout.status, 200, await logout.clone().text());
  const [signOut] = logout.headers.getSetCookie().filter((line) => line.startsWith('rr_session='));
  assert.ok(signOut, 'sign-out clears the cookie');
  return { signIn, signOut };
}

const https = suite<{ t: TestApp }>('session cookie: a development Relay whose dashboard is at an https origin');
https.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_ENV: 'development', RELAY_DASHBOARD_ORIGIN: 'https://dashboard.relay.test' }, { listen: true });
});
https.after(async (ctx) => {
  await ctx.t?.close();
});

https('the cookie is Secure, set and cleared alike', async ({ t }) => {
  const { signIn, signOut } = await signInAndOut(t, 'https://dashboard.relay.test', 'tls@acme.test');
  assert.ok(attributesOf(signIn).includes('secure'), signIn);
  assert.ok(attributesOf(signIn).includes('httponly'), signIn);
  assert.ok(attributesOf(signOut).includes('secure'), signOut);
});

https.run();

const http = suite<{ t: TestApp }>('session cookie: a development Relay whose dashboard is at a plain-http origin');
http.before(async (ctx) => {
  ctx.t = await startTestApp({ RELAY_ENV: 'development', RELAY_DASHBOARD_ORIGIN: 'http://localhost:8025' }, { listen: true });
});
http.after(async (ctx) => {
  await ctx.t?.close();
});

http('the cookie is not Secure, so local http development keeps its session', async ({ t }) => {
  const { signIn, signOut } = await signInAndOut(t, 'http://localhost:8025', 'plain@acme.test');
  assert.not.ok(attributesOf(signIn).includes('secure'), signIn);
  assert.ok(attributesOf(signIn).includes('httponly'), signIn);
  assert.not.ok(attributesOf(signOut).includes('secure'), signOut);
});

http.run();
