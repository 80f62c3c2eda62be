// On an email's message page, "Show the raw source" reads the outbox copy again each time the
// details are opened until the source itself is there: a read that failed for a passing reason
// (the session ended, Relay restarting, a 503) must not leave its error for good, with nothing on
// the page that tries again (the session notice even says "Sign in again … then try again here").
// Why it matters: docs/dashboard.md "When the session ends": signed in again, "the person comes
// back and presses the same button again; the first request that works takes the notice away";
// here the same control does nothing, so the page is stuck until it is reloaded.
// Correct: only the source itself is kept; after a failure, opening the details again reads it again.
import * as assert from 'uvu/assert';
import type { BrowserContext, Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: the raw source after a failed read', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: true });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const SIGN_IN_AGAIN = 'Sign in again (opens a new tab)';

/** Signs in through the notice's link, in the tab it opens, as docs/dashboard.md says to. */
async function signInAgain(page: Page, context: BrowserContext, f: DashboardFixture): Promise<void> {
  const [tab] = await Promise.all([context.waitForEvent('page'), page.getByRole('link', { name: SIGN_IN_AGAIN }).click()]);
  await tab.getByLabel('Email').fill(f.owner.email);
  await tab.getByLabel('Password').fill(f.owner.password);
  await tab.getByRole('button', { name: 'Sign in' }).click();
  await tab.getByText(`You are signed in as ${f.owner.email}.`).waitFor();
  await tab.close();
}

test('the session ended when the raw source was first opened: signed in again, opening it again shows the source', async ({ f, browser }) => {
  const emailId = await sendEmail(f, { subject: 'Receipt 42', text: 'Thanks for your order.' });
  const cookie = await ownerCookie(f);
  const outbox = `${f.t.url}/v1/projects/${f.projectId}/outbox/${emailId}`;
  await waitUntil(async () => (await fetch(outbox, { headers: { cookie } })).status === 200, 'the outbox has the message', 30_000);

  const { page, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}/message`);
  await page.getByRole('heading', { name: 'Receipt 42', level: 1 }).waitFor();

  await context.clearCookies();
  const details = page.locator('details', { has: page.getByText('Show the raw source') });
  await page.getByText('Show the raw source').click();
  await details.getByText(/^Your session has ended/).waitFor();

  await signInAgain(page, context, f);
  // Closed and opened again: the reader tries again, as the notice says.
  await page.getByText('Show the raw source').click();
  assert.is(await details.getAttribute('open'), null, 'the details are closed');
  const reads: string[] = [];
  page.on('request', (request) => {
    if (new URL(request.url()).pathname === `/v1/projects/${f.projectId}/outbox/${emailId}`) reads.push(request.url());
  });
  // The test's marker: a request made by a toggle listener added after the page's own, so seen
  // after any read the page's listener makes when the details open.
  const marker = page.waitForRequest((request) => new URL(request.url()).pathname === '/marker-after-the-toggle');
  await details.evaluate((element) => element.addEventListener('toggle', () => void fetch('/marker-after-the-toggle').catch(() => {})));
  await page.getByText('Show the raw source').click();
  await marker;
  assert.is(reads.length, 1, 'opening the raw source again after the failure sent no request: the error stays, and nothing on the page reads the source again');
  await page.locator('pre[aria-label="Raw source"]').waitFor();
  assert.match(await page.locator('pre[aria-label="Raw source"]').innerText(), /Subject: Receipt 42/);
  await context.close();
});

test.run();
