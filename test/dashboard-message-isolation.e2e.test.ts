// An email's HTML part (message.html) is served from the dashboard's own origin, and a member
// can reach it outside the message page's <iframe sandbox>: a link followed from anywhere is a
// top-level GET, and the Lax session cookie rides along. Opened that way it is still sandboxed
// (its CSP says so) or refused outright (Sec-Fetch-Dest: document), so a meta refresh in the
// sender's HTML never takes the member's browser off the dashboard's origin.
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { startTracker, type Tracker } from './support/tracker.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; tracker: Tracker }

const test = skippableSuite<Ctx>('dashboard: an email\'s HTML opened outside its frame', chromiumMissing);

test.before(async (ctx) => {
  ctx.tracker = await startTracker();
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.tracker?.close();
});

test('message.html opened as a page of its own does not follow the sender\'s meta refresh', async ({ f, browser, tracker }) => {
  const emailId = await sendEmail(f, {
    subject: 'Your invoice',
    html: `<meta http-equiv="refresh" content="0;url=${tracker.base}/refreshed"><p>Invoice attached</p>`,
  });
  const { page } = await browser.open();
  await signIn(page, f);
  const messages: string[] = [];
  page.on('console', (message) => messages.push(message.text()));
  const response = await page.goto(`${f.origin}/v1/projects/${f.projectId}/emails/${emailId}/message.html`);
  if (response?.status() === 200) {
    // Served: then the browser either follows the refresh (the tracker hears it) or reports it refused.
    await waitUntil(
      () => tracker.count('/refreshed') > 0 || messages.some((text) => /Refused to execute the redirect/.test(text)),
      'the meta refresh is either followed or refused',
    );
  }
  assert.is(tracker.count('/refreshed'), 0,
    `the email's meta refresh navigated the member's browser away from the dashboard origin (CSP of the answer: ${response?.headers()['content-security-policy']})`);
  await page.context().close();
});

test('where the browser does not say it is opening a page (no Sec-Fetch-Dest), the answer\'s own policy still sandboxes it', async ({ f, browser, tracker }) => {
  const emailId = await sendEmail(f, {
    subject: 'Your receipt',
    html: `<meta http-equiv="refresh" content="0;url=${tracker.base}/refreshed-anyway"><p>Receipt attached</p>`,
  });
  const { page } = await browser.open();
  await signIn(page, f);
  const messages: string[] = [];
  page.on('console', (message) => messages.push(message.text()));
  const url = `${f.origin}/v1/projects/${f.projectId}/emails/${emailId}/message.html`;
  // Browsers send Sec-Fetch-* only to trustworthy origins (https, localhost): a dashboard on
  // plain http at another name gets none. Chromium adds them here, so the request goes out
  // without them from outside the browser, and the browser gets the server's answer as it is.
  await page.route(url, async (route) => {
    const headers = Object.fromEntries(Object.entries(await route.request().allHeaders()).filter(([name]) => !name.startsWith('sec-fetch-')));
    await route.fulfill({ response: await route.fetch({ headers }) });
  });
  const response = await page.goto(url);
  assert.is(response?.status(), 200);
  await page.getByText('Receipt attached').waitFor();
  await waitUntil(
    () => tracker.count('/refreshed-anyway') > 0 || messages.some((text) => /Refused to execute the redirect/.test(text)),
    'the meta refresh is either followed or refused',
  );
  assert.is(tracker.count('/refreshed-anyway'), 0,
    `the email's meta refresh navigated the member's browser away (CSP of the answer: ${response?.headers()['content-security-policy']})`);
  await page.context().close();
});

test.run();
