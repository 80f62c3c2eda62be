// The session ending under a drawn page (it expired, or the person signed out in another tab), in
// real Chromium. Going to sign-in would throw away what was typed, so the page stays, keeps every
// field and says the session ended, with a sign-in in a new tab; once signed in there, the same
// button works again. A page's first load still goes to sign-in (test/dashboard.e2e.test.ts).
import * as assert from 'uvu/assert';
import type { BrowserContext, Page } from 'playwright-core';
import { axeViolations, chromiumMissing, launchBrowser, screenshot, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { waitUntil } from './support/eventually.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: the session ending while a page is open, in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const WRITTEN = '<p>Hello {{name}}, here is a long message I spent a while writing.</p>';
const SIGN_IN_AGAIN = 'Sign in again (opens a new tab)';

/** Signs in through the notice's link, in the tab it opens, and closes that tab once it says the session is back. */
async function signInAgain(page: Page, context: BrowserContext, f: DashboardFixture): Promise<void> {
  const [tab] = await Promise.all([context.waitForEvent('page'), page.getByRole('link', { name: SIGN_IN_AGAIN }).click()]);
  await tab.getByLabel('Email').fill(f.owner.email);
  await tab.getByLabel('Password').fill(f.owner.password);
  await tab.getByRole('button', { name: 'Sign in' }).click();
  await tab.getByText(`You are signed in as ${f.owner.email}.`).waitFor();
  assert.is(new URL(tab.url()).pathname, '/signed-in');
  await tab.close();
}

test('the template editor: a preview answered "session ended" keeps the page and what was typed; created once signed in again', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const here = `/projects/${f.projectId}/templates/new`;
  await page.goto(`${f.origin}${here}`);
  await page.getByRole('heading', { name: 'New template', level: 1 }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('Welcome');
  await page.getByLabel('Slug').fill('welcome');
  await page.getByLabel('Subject').fill('Welcome {{name}}');
  await page.getByLabel('HTML', { exact: true }).fill(WRITTEN);
  await page.locator('.preview-subject').getByText('Subject: Welcome name').waitFor();

  await context.clearCookies();
  await page.getByLabel('Text', { exact: true }).pressSequentially('Hello');
  // The next preview is answered 401: the page says so, and stays.
  await page.getByRole('link', { name: SIGN_IN_AGAIN }).waitFor();
  await page.locator('[aria-live]').getByText(/^Your session has ended/).waitFor();
  assert.is(new URL(page.url()).pathname, here);
  assert.is(await page.getByLabel('HTML', { exact: true }).inputValue(), WRITTEN);
  assert.is(await page.getByLabel('Text', { exact: true }).inputValue(), 'Hello');
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'session-ended-desktop');

  await signInAgain(page, context, f);
  await page.getByRole('button', { name: 'Create template' }).click();
  await page.waitForURL((url) => url.pathname.startsWith(`/projects/${f.projectId}/templates/tpl`));
  await page.getByRole('heading', { name: 'Welcome', level: 1 }).waitFor();
  assert.is(await page.getByLabel('HTML', { exact: true }).inputValue(), WRITTEN);
  assert.is(await page.getByLabel('Text', { exact: true }).inputValue(), 'Hello');
  assert.equal(problems, []);
  await context.close();
});

test('a form submitted after the session ended keeps what was typed, says so, and works when pressed again after signing in', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const here = `/projects/${f.projectId}/api-keys`;
  await page.goto(`${f.origin}${here}`);
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  await page.getByLabel('Name').fill('Warehouse reporting');
  await page.getByLabel('email:send').uncheck();
  await context.clearCookies();
  await page.getByRole('button', { name: 'Create key' }).click();

  const refused = page.getByRole('form', { name: 'Create a key' }).getByRole('alert');
  await refused.waitFor();
  assert.match(await refused.innerText(), /^Your session has ended, so Relay did not do this\./);
  await page.getByRole('link', { name: SIGN_IN_AGAIN }).waitFor();
  assert.is(new URL(page.url()).pathname, here);
  assert.is(await page.getByLabel('Name').inputValue(), 'Warehouse reporting');
  assert.not.ok(await page.getByLabel('email:send').isChecked());

  await signInAgain(page, context, f);
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByText('Copy it now: it is shown this once').waitFor();
  assert.not.match(await page.locator('tr', { hasText: 'Warehouse reporting' }).innerText(), /email:send/);
  // A request that worked again takes the notice away.
  assert.is(await page.getByRole('link', { name: SIGN_IN_AGAIN }).count(), 0);
  assert.is(await refused.count(), 0);
  assert.equal(problems, []);
  await context.close();
});

test('a page that follows changes (the email list) stays when its refresh finds the session ended, and follows again once signed in', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const here = `/projects/${f.projectId}/emails`;
  await page.goto(`${f.origin}${here}`);
  await page.getByText('No emails yet').waitFor();
  await page.getByLabel('Recipient').fill('buyer@');
  await context.clearCookies();
  await page.getByRole('link', { name: SIGN_IN_AGAIN }).waitFor();
  assert.is(new URL(page.url()).pathname, here);
  assert.is(await page.getByLabel('Recipient').inputValue(), 'buyer@');

  await signInAgain(page, context, f);
  await sendEmail(f, { subject: 'Later' });
  await page.getByRole('link', { name: 'Later' }).waitFor();
  assert.is(await page.getByRole('link', { name: SIGN_IN_AGAIN }).count(), 0);
  assert.equal(problems, []);
  await context.close();
});

test('a list left open after its session ended reads less and less often, and at its own pace again once signed in', async ({ f, browser }) => {
  const { page, context } = await browser.open();
  await signIn(page, f);
  const here = `/projects/${f.projectId}/emails`;
  const list = `/v1/projects/${f.projectId}/emails`;
  let reads = 0;
  page.on('request', (request) => {
    if (request.method() === 'GET' && new URL(request.url()).pathname === list) reads++;
  });
  await page.clock.install();
  await page.goto(`${f.origin}${here}`);
  await page.getByLabel('Recipient').waitFor();
  await waitUntil(() => reads > 0, 'the list was read');
  await context.clearCookies();
  /** Moves the page's clock a second at a time until `condition` holds; the seconds it took. */
  const advanceUntil = async (condition: () => boolean | Promise<boolean>, what: string) => {
    let seconds = 0;
    await waitUntil(async () => (await condition()) || (await page.clock.runFor(1000), seconds++, false), what, 60_000);
    return seconds;
  };
  await advanceUntil(async () => (await page.getByRole('link', { name: SIGN_IN_AGAIN }).count()) > 0, 'the page says the session ended');
  // Seconds of the page's clock between one failed read and the next: they grow to 30 (at the
  // list's own pace of 2 s they would stay 2). The clock moves on while a read is answered, so a
  // gap may be a few seconds longer than the wait the page set.
  const gaps: number[] = [];
  for (let round = 1; round <= 8; round++) {
    const before = reads;
    gaps.push(await advanceUntil(() => reads > before, `failed read ${round}`));
  }
  assert.ok(gaps[7] >= 25 && gaps[6] >= 20 && Math.max(...gaps) <= 40 && gaps[0] <= 10, `seconds between failed reads: ${gaps.join(', ')}`);

  await signInAgain(page, context, f);
  const back = reads;
  await advanceUntil(() => reads > back, 'the next read after signing in again');
  const gapsAfter: number[] = [];
  for (let round = 1; round <= 3; round++) {
    const before = reads;
    gapsAfter.push(await advanceUntil(() => reads > before, `read ${round} after signing in again`));
  }
  assert.ok(Math.max(...gapsAfter) <= 10, `seconds between reads once signed in again (not the 30 s of failed reads): ${gapsAfter.join(', ')}`);
  assert.is(await page.getByRole('link', { name: SIGN_IN_AGAIN }).count(), 0);
  await context.close();
});

test.run();
