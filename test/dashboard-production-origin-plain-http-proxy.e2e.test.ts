// With RELAY_ENV=production the session cookie is `__Host-rr_session; Secure`, which browsers
// set only from a secure context: an https page, or a loopback host (RFC 6265bis 5.7; Chromium
// and Firefox enforce it). Behind a proxy serving the dashboard over plain HTTP on another host
// name, every sign-in answered 200 and the browser dropped the cookie, back at the sign-in page
// without a word. So the start refuses an http dashboard origin in production, naming
// RELAY_DASHBOARD_ORIGIN (exit 78 from the CLI), unless it is a loopback host; and through a
// plain-HTTP nginx on localhost, real Chromium signs in.
import * as assert from 'uvu/assert';
import { chromium, type Browser, type Response } from 'playwright-core';
import { ConfigError } from '../infra/config.ts';
import { createUser } from '../apps/services/management/users.ts';
import { CHROMIUM, chromiumMissing } from './support/browser.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { PASSWORD } from './support/management.ts';
import { nginxMissing, startNginx, type NginxInstance } from './support/nginx.ts';
import { freePort } from './support/free-port.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const HOST = 'relay.corp.example';
const EMAIL = 'ops@corp.example';

const test = skippableSuite('production dashboard behind a plain-HTTP proxy', chromiumMissing ?? nginxMissing());

test('a production start with a plain-HTTP dashboard origin on another host is refused, naming the variable', async () => {
  const relayPort = await freePort();
  try {
    const t = await startTestApp({ RELAY_ENV: 'production', RELAY_DELIVERY: 'outbox', PORT: String(relayPort), RELAY_DASHBOARD_ORIGIN: `http://${HOST}:8080` }, { listen: true, port: relayPort });
    await t.close();
  } catch (error) {
    assert.instance(error, ConfigError);
    assert.is((error as ConfigError).variable, 'RELAY_DASHBOARD_ORIGIN');
    assert.match((error as Error).message, /https/);
    return;
  }
  assert.unreachable('the start was not refused');
});

test('on a loopback origin over plain HTTP, through nginx, a browser signs in', async () => {
  const relayPort = await freePort();
  const publicPort = await freePort();
  const origin = `http://localhost:${publicPort}`;
  const t = await startTestApp({ RELAY_ENV: 'production', RELAY_DELIVERY: 'outbox', PORT: String(relayPort), RELAY_DASHBOARD_ORIGIN: origin }, { listen: true, port: relayPort });
  let nginx: NginxInstance | undefined;
  let browser: Browser | undefined;
  try {
    await createUser(t.ctx.documents, { email: EMAIL, password: PASSWORD }, t.ctx.now());
    nginx = await startNginx({ upstreamPort: relayPort, port: publicPort });
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--host-resolver-rules=MAP localhost 127.0.0.1'],
    });
    const page = await (await browser.newContext()).newPage();
    page.setDefaultTimeout(15_000);
    await page.goto(`${origin}/sign-in`);
    await page.getByLabel('Email').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    // Every answer to /v1/session, in the order they come: the sign-in, then the page it leads
    // to asking who is signed in (the first request that needs the cookie).
    const sessions: Response[] = [];
    page.on('response', (r) => { if (r.url() === `${origin}/v1/session`) sessions.push(r); });
    await page.getByRole('button', { name: 'Sign in' }).click();
    let next: Response | undefined;
    await waitUntil(() => {
      const at = sessions.findIndex((r) => r.request().method() === 'POST');
      next = at < 0 ? undefined : sessions.slice(at + 1).find((r) => r.request().method() === 'GET');
      return next !== undefined;
    }, 'the sign-in, then the next page asking who is signed in');
    const answer = sessions.find((r) => r.request().method() === 'POST')!;
    assert.is(answer.status(), 200, 'Relay accepted the password');
    const setCookie = (await answer.allHeaders())['set-cookie'] ?? '';
    assert.is(next!.status(), 200,
      `signed in (200), the browser on ${origin} dropped the cookie Relay set (${setCookie.split(';').slice(1).join(';').trim()}): the next request is ${next!.status()} and the reader is back at ${new URL(page.url()).pathname}`);
  } finally {
    await browser?.close();
    await nginx?.stop();
    await t.close();
  }
});

test.run();
