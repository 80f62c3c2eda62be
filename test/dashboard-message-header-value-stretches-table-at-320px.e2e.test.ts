// A long header value wraps on an email's message page at 320 CSS px: a List-Unsubscribe header
// with an ordinary signed token (`<https://…/unsubscribe?token=…>`, a few hundred characters
// without a space; header lines may be up to 998, RFC 5322 2.1.1) stays within the width the
// narrow layout gives a table (38rem), and the page does not scroll sideways. The headers are
// name/value facts, not a table whose Value column a long token would stretch to thousands of
// pixels, to be read by scrolling one line sideways (WCAG 2.1 SC 1.4.10 Reflow).
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser }

const test = skippableSuite<Ctx>('dashboard: a long header value at 320 px', chromiumMissing);

const REFLOW = { width: 320, height: 640 };

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

test('a List-Unsubscribe header with a signed token wraps in the headers of the message page', async ({ f, browser }) => {
  // A base64url token as unsubscribe links carry: 320 characters, no space to break at.
  const token = 'eyJhbGciOiJIUzI1NiJ9.'.padEnd(320, 'Qm9va2luZ3NfMjAyNl9yZWNpcGllbnRfNDIx');
  const unsubscribe = `<https://${f.domain}/unsubscribe?token=${token}>`;
  const emailId = await sendEmail(f, { subject: 'Your booking', text: 'See you soon.', headers: { 'List-Unsubscribe': unsubscribe } });
  const { page, context } = await browser.open(REFLOW);
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}/message`);
  const value = page.locator('td, dd').filter({ hasText: unsubscribe }).first();
  await value.waitFor();
  // A string, not a function: it runs in the page, whose globals the test's types do not know.
  const measured = await page.evaluate(`((element) => ({
    width: Math.round(element.getBoundingClientRect().width),
    limit: Math.round(38 * parseFloat(getComputedStyle(document.documentElement).fontSize)),
    page: document.scrollingElement.scrollWidth,
    viewport: innerWidth,
  }))([...document.querySelectorAll('td, dd')].find((cell) => cell.textContent === ${JSON.stringify(unsubscribe)}))`) as { width: number; limit: number; page: number; viewport: number };
  assert.ok(measured.page <= measured.viewport, `the page itself scrolls sideways (${measured.page} px wide)`);
  assert.ok(measured.width <= measured.limit,
    `the List-Unsubscribe value is one line ${measured.width} CSS px wide (the narrow layout's tables are ${measured.limit} px): reading it takes scrolling its box sideways at ${measured.viewport} px`);
  await context.close();
});

test.run();
