// The dashboard in real Chromium: signing in and out, the page served on the dashboard origin
// (another address of the server is sent there), the email list following a send made through
// the API, the pages' own security headers, and accessibility and narrow-screen checks.
import * as assert from 'uvu/assert';
import { PAGE_CSP } from '../apps/dashboard/dashboard.ts';
import { PAGES } from '../apps/dashboard/client/route-table.ts';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { axeViolations, chromiumMissing, DESKTOP, launchBrowser, NARROW, overflowsSideways, screenshot, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: sign-in, layout and the email list in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({ RELAY_WEBHOOK_ALLOW: 'localhost:443' }, { processors: true });
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
  // Signing in leads back to the page asked for, its filters kept in the address.
  await page.getByLabel('Email').fill(f.owner.email);
  await page.getByLabel('Password').fill(f.owner.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${f.origin}/projects/${f.projectId}/emails?status=delivered`);
  assert.is(await page.getByLabel('Status').inputValue(), 'delivered');
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
  await screenshot(page, 'emails-following-desktop');

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
  await screenshot(page, 'emails-following-narrow');
  assert.equal(problems, []);
  await page.context().close();
});

test('every page of the route table, on a desktop and at 375 pixels: drawn, no sideways scrolling, no serious axe violation, a screenshot each', async ({ f, browser }) => {
  // Something on every page: an email with both parts, a template, a webhook endpoint.
  const emailId = await sendEmail(f, { subject: 'A page of each', html: '<p>Hello</p>', text: 'Hello' });
  const cookie = await ownerCookie(f);
  const template = await (await fetch(`${f.t.url}/v1/templates?projectId=${f.projectId}`, {
    method: 'POST', headers: { cookie, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Welcome', slug: 'welcome', subject: 'Welcome {{name}}', html: '<p>Hello {{name}}</p>', text: 'Hello {{name}}' }),
  })).json() as { id: string };
  const { endpoint } = await createEndpoint(f.t.ctx.documents, f.t.ctx.services.secrets, { dnsServers: [], allow: f.t.config.webhookAllow }, {
    workspaceId: f.workspaceId, projectId: f.projectId, url: 'https://localhost/relay-events', events: ['email.sent'],
  }, new Date());
  const values: Record<string, string> = {
    projectId: f.projectId, workspaceId: f.workspaceId, emailId, templateId: template.id, endpointId: endpoint._id, domainId: f.domainId,
  };
  for (const [viewport, width] of [[DESKTOP, 'desktop'], [NARROW, 'narrow']] as const) {
    const { page, problems, context } = await browser.open(viewport);
    await signIn(page, f);
    for (const entry of PAGES) {
      const path = entry.path.replace(/:(\w+)/g, (_, name: string) => {
        if (!(name in values)) throw new Error(`${entry.path}: give this test a ${name}`);
        return values[name];
      });
      await page.goto(`${f.origin}${path}`);
      const heading = page.getByRole('heading', { level: 1 });
      await heading.filter({ hasText: /\S/ }).waitFor();
      await page.waitForLoadState('networkidle');
      const title = await heading.innerText();
      assert.not.match(title, /^(Something went wrong|Page not found)$/, `${path}: ${title}`);
      if (width === 'narrow') assert.not.ok(await overflowsSideways(page), `${path} scrolls sideways at 375 px`);
      assert.equal(await axeViolations(page), [], `${path} (${width})`);
      await screenshot(page, `${entry.module}-${width}`);
    }
    assert.equal(problems, [], width);
    await context.close();
  }
});

test('the switcher: a new project from the projects page, then the same section of either project', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.getByRole('link', { name: 'Projects' }).click();
  await page.getByLabel('Name').fill('Billing');
  await page.getByRole('button', { name: 'Create project' }).click();
  await page.waitForURL((url) => /^\/projects\/[^/]+\/emails$/.test(url.pathname) && !url.pathname.includes(f.projectId));
  const billing = new URL(page.url()).pathname.split('/')[2];
  assert.is(await page.getByLabel('Project', { exact: true }).inputValue(), billing);
  await page.getByRole('link', { name: 'Templates' }).click();
  await page.getByLabel('Project', { exact: true }).selectOption(f.projectId);
  await page.getByRole('button', { name: 'Switch project' }).click();
  await page.waitForURL(`${f.origin}/projects/${f.projectId}/templates`);
  // A workspace page links back to the project last used.
  await page.getByRole('link', { name: 'Domains' }).click();
  await page.getByRole('heading', { name: 'Domains', level: 1 }).waitFor();
  assert.is(await page.getByRole('link', { name: 'Emails' }).getAttribute('href'), `/projects/${f.projectId}/emails`);
  await page.goto(`${f.origin}/`);
  await page.waitForURL(`${f.origin}/projects/${f.projectId}/emails`);
  assert.equal(problems, []);
  await context.close();
});

test.run();

// Signing out while Relay cannot be reached: the request fails, so the page says so and stays
// where it is, signed in, rather than sending the reader to a sign-in page as if it had worked.
const unreachable = skippableSuite<{ f: DashboardFixture; browser: TestBrowser; stopped: boolean }>('dashboard: a sign-out that fails, in Chromium', chromiumMissing);

unreachable.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
unreachable.after(async (ctx) => {
  await ctx.browser?.close();
  if (!ctx.stopped) await ctx.f?.close();
});

unreachable('with Relay stopped, Sign out shows an error and the reader stays on the page, signed in', async (ctx) => {
  const { f, browser } = ctx;
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const here = page.url();
  await page.getByText('No emails yet').waitFor();
  ctx.stopped = true;
  await f.close();

  await page.getByRole('button', { name: 'Sign out' }).click();
  const error = page.getByRole('alert');
  await error.waitFor();
  assert.match(await error.innerText(), /^Signing out failed, so you are still signed in: Relay could not be reached/);
  assert.is(page.url(), here);
  assert.is(await page.locator('.account .user').innerText(), f.owner.email);
  // The refused connections, and a list refresh answered 503 while Relay was stopping, are the
  // browser's own report of what the test did; nothing else went wrong.
  const stopping = (problem: string) => problem.includes('net::ERR_CONNECTION_REFUSED') || problem.includes('status of 503 (Service Unavailable)');
  assert.equal(problems.filter((problem) => !stopping(problem)), []);
  await context.close();
});

unreachable.run();
