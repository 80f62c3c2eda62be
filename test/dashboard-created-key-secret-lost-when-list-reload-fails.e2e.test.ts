// Creating an API key (or a webhook endpoint) shows the new secret as soon as the POST answered,
// before the list is drawn again: were the list drawn first and that second request failed (the
// session ended in another tab just then, Relay restarting, a 503 from a proxy), the form would
// say "Your session has ended, so Relay did not do this" although Relay created the key, and the
// secret, which Relay keeps only as a hash and never shows again, would be thrown away; the reader
// would press "Create key" again and get a second key, the first a live credential nobody has.
// Why it matters: docs/dashboard.md "Actions" (a failure is shown for the action that failed) and
// "When the session ends" (the failed action says it was not done; here the action was done);
// the contract shows a key's secret once, at creation (POST …/api-keys answers it, and only it).
// Correct: once the POST has answered, the secret is shown whatever happens to the list's
// refresh (a failed refresh may say the list could not be read again, never that the key was not made).
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { call } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: a key created just before the session ends', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

test('signed out in another tab while "Create key" runs: the key Relay created has its secret shown, not "Relay did not do this"', async ({ f, browser }) => {
  const { page, context } = await browser.open();
  await signIn(page, f);
  const here = `/projects/${f.projectId}/api-keys`;
  await page.goto(`${f.origin}${here}`);
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  // A second tab of the same person, on the same page.
  const other = await context.newPage();
  await other.goto(`${f.origin}${here}`);
  await other.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();

  // The key's creation reaches Relay and is answered; just as the answer arrives, the person
  // signs out in the other tab (the page's next request finds the session ended).
  await page.route(`**/v1/projects/${f.projectId}/api-keys`, async (route) => {
    if (route.request().method() !== 'POST') return route.continue();
    const created = await route.fetch();
    await other.getByRole('button', { name: 'Sign out' }).click();
    await other.waitForURL((url) => url.pathname === '/sign-in');
    await route.fulfill({ response: created });
  });
  await page.getByLabel('Name').fill('Billing worker');
  await page.getByRole('button', { name: 'Create key' }).click();

  // Whatever the page ends up saying: the secret panel, or the form's refusal.
  const form = page.getByRole('form', { name: 'Create a key' });
  await page.locator('.secret').or(form.getByRole('alert')).first().waitFor();
  const keys = (await call(f.t, 'GET', `/v1/projects/${f.projectId}/api-keys`, { as: await ownerCookie(f) })).json().apiKeys as Array<{ name: string }>;
  assert.is(keys.filter((key) => key.name === 'Billing worker').length, 1, 'Relay created the key');
  const refusal = (await form.getByRole('alert').count()) > 0 ? await form.getByRole('alert').innerText() : '';
  assert.not.match(refusal, /did not do this/, `the page says the key was not created, although it was: ${JSON.stringify(refusal)}`);
  assert.is(await page.locator('.secret .copy-value').count(), 1, 'the secret of the key Relay created is not shown, and can never be shown again');
  await context.close();
});

test.run();
