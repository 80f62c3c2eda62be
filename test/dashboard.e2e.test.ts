// The dashboard in real Chromium: signing in and out, the page served on the dashboard origin
// (another address of the server is sent there), the email list following a send made through
// the API, the pages' own security headers, and accessibility and narrow-screen checks.
import * as assert from 'uvu/assert';
import { PAGE_CSP } from '../apps/dashboard/dashboard.ts';
import { axeViolations, chromiumMissing, launchBrowser, NARROW, overflowsSideways, screenshot, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: sign-in, layout and the email list in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

test('an address that is not the dashboard origin leads to it, and a visitor without a session to sign-in', async ({ f, browser }) => {
  const { page, problems } = await browser.open();
  await page.goto(`http://127.0.0.1:${f.port}/projects/${f.projectId}/emails?status=delivered`);
  await page.waitForURL(`${f.origin}/sign-in?next=${encodeURIComponent(`/projects/${f.projectId}/emails?status=delivered`)}`);
  await page.getByRole('heading', { name: 'Sign in to Relay' }).waitFor();
  assert.equal(problems, []);
  await page.context().close();
});

test('every page and module is served with a strict policy: no inline script, no eval, never framed', async ({ f }) => {
  for (const path of ['/sign-in', `/projects/${f.projectId}/emails`, '/assets/main.ts', '/assets/dashboard.css']) {
    const response = await fetch(`${f.origin}${path}`);
    assert.is(response.status, 200, path);
    const csp = response.headers.get('content-security-policy') ?? '';
    assert.is(csp, PAGE_CSP, path);
    assert.match(csp, /(^|; )script-src 'self'(;|$)/);
    assert.not.match(csp, /unsafe-eval/);
    assert.match(csp, /frame-ancestors 'none'/);
    assert.is(response.headers.get('x-content-type-options'), 'nosniff', path);
  }
  assert.is((await fetch(`${f.origin}/assets/main.ts`)).headers.get('content-type'), 'text/javascript; charset=utf-8');
  assert.is((await fetch(`${f.origin}/assets/nope.ts`)).status, 404);
});

test('sign in, see the email list follow a send made through the API, open nothing foreign, sign out', async ({ f, browser }) => {
  const { page, problems } = await browser.open();
  await signIn(page, f);
  assert.is(new URL(page.url()).pathname, `/projects/${f.projectId}/emails`);
  await page.getByRole('heading', { name: 'Emails', level: 1 }).waitFor();
  await page.getByText('No emails yet').waitFor();
  await screenshot(page, 'emails-empty-desktop');

  const id = await sendEmail(f, { subject: 'Order 1001 shipped' });
  // Nobody reloads: the first page follows new emails by itself.
  const link = page.getByRole('link', { name: 'Order 1001 shipped' });
  await link.waitFor();
  assert.is(await link.getAttribute('href'), `/projects/${f.projectId}/emails/${id}`);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'emails-desktop');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.waitForURL(`${f.origin}/sign-in`);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails`);
  await page.waitForURL((url) => url.pathname === '/sign-in');
  assert.equal(problems, []);
  await page.context().close();
});

test('sign-in and the email list work on a 375-pixel screen without sideways scrolling', async ({ f, browser }) => {
  const { page, problems } = await browser.open(NARROW);
  await page.goto(`${f.origin}/sign-in`);
  await page.getByRole('heading', { name: 'Sign in to Relay' }).waitFor();
  assert.not.ok(await overflowsSideways(page));
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'sign-in-narrow');
  await signIn(page, f);
  await page.getByRole('heading', { name: 'Emails', level: 1 }).waitFor();
  await page.getByRole('link', { name: 'Order 1001 shipped' }).waitFor();
  assert.not.ok(await overflowsSideways(page));
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'emails-narrow');
  assert.equal(problems, []);
  await page.context().close();
});

test.run();
