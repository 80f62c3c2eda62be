// Dashboard pages with ordinary data: the email list refreshes itself every two seconds without
// redrawing (and so without taking keyboard focus away) while nothing changed, and a redraw for
// a new email puts focus back on the link it was on and says so in a short status; long values the
// API accepts (a 128-character tag name, a long user address in the header) wrap instead of
// widening the page at 375 pixels or on a desktop; and a workspace whose allowance is 0 ("no
// sending", relay workspace quota) reads as such on the usage page, not as "NaN %" or "Infinity %".
import * as assert from 'uvu/assert';
import { createUser } from '../apps/services/management/users.ts';
import { setWorkspaceAllowances } from '../apps/services/management/workspaces.ts';
import { chromiumMissing, DESKTOP, launchBrowser, NARROW, overflowsSideways, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { PASSWORD } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser }

const test = skippableSuite<Ctx>('dashboard: pages with ordinary data', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: true });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

test('the email list keeps keyboard focus where the reader put it while nothing changes', async ({ f, browser }) => {
  const subjects = ['Order 1', 'Order 2', 'Order 3'];
  for (const subject of subjects) await sendEmail(f, { subject });
  const { page, context } = await browser.open();
  await signIn(page, f);
  const list = `/v1/projects/${f.projectId}/emails`;
  // Every email at its outcome first: from then on each refresh answers the same page.
  await page.locator('.results .badge-sent').nth(subjects.length - 1).waitFor();
  const link = page.getByRole('link', { name: 'Order 2' });
  await link.focus();
  assert.is(await page.evaluate('document.activeElement.textContent'), 'Order 2');
  // Two refreshes answered: the first has been drawn by the time the second arrives.
  for (let i = 0; i < 2; i++) await page.waitForResponse((response) => new URL(response.url()).pathname === list);
  assert.is(await page.evaluate('document.activeElement.tagName + " " + document.activeElement.textContent.slice(0, 40)'), 'A Order 2',
    'a refresh that found nothing new took the keyboard focus away from the link');
  await context.close();
});

test('a new email redraws the list: focus stays on the link it was on, and a short status says the list changed', async ({ f, browser }) => {
  const { page, context } = await browser.open();
  await signIn(page, f);
  await page.getByRole('link', { name: 'Order 3' }).waitFor();
  const status = page.getByRole('status');
  assert.is(await status.textContent(), '', 'the first drawing is not announced as a change');
  await page.getByRole('link', { name: 'Order 1' }).focus();
  await sendEmail(f, { subject: 'Order 4' });
  await page.getByRole('link', { name: 'Order 4' }).waitFor();
  assert.is(await page.evaluate('document.activeElement.tagName + " " + document.activeElement.textContent.slice(0, 40)'), 'A Order 1',
    'redrawing the list for a new email took the keyboard focus away from the link');
  assert.match(await status.textContent() ?? '', /^The list was updated at .+: 4 emails on this page\.$/);
  await context.close();
});

test('an email with a long tag name (128 characters, as the API allows) does not widen the page', async ({ f, browser }) => {
  const tag = 'campaign_'.padEnd(128, 'x');
  const emailId = await sendEmail(f, { subject: 'Tagged', tags: { [tag]: 'spring' } });
  const { page, context } = await browser.open(NARROW);
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}`);
  await page.locator('section', { has: page.getByRole('heading', { name: 'Tags' }) }).getByText(tag).waitFor();
  const narrow = await overflowsSideways(page);
  await page.setViewportSize(DESKTOP);
  const desktop = await overflowsSideways(page);
  assert.equal({ narrow, desktop }, { narrow: false, desktop: false }, 'the tag name widens the page (true: scrolls sideways)');
  await context.close();
});

test('a user with a long email address (63 characters) signs in on a 375-pixel screen without sideways scrolling', async ({ f, browser }) => {
  const email = 'firstname.lastname.department.team@subsidiary.dash.example.test';
  await createUser(f.t.ctx.documents, { email, password: PASSWORD }, f.t.ctx.now());
  const { page, context } = await browser.open(NARROW);
  await signIn(page, f, { email, password: PASSWORD });
  await page.getByRole('heading', { name: 'Invitations', level: 1 }).waitFor();
  await page.getByText(email).waitFor();
  assert.is(await overflowsSideways(page), false, 'the signed-in address in the header widens the page');
  await context.close();
});

test('usage of a workspace whose allowance is 0 shows figures, not NaN or Infinity', async ({ f, browser }) => {
  await sendEmail(f, { subject: 'Before the quota' });
  await setWorkspaceAllowances(f.t.ctx.documents, f.workspaceId, { workspaceRecipients: 0 });
  const { page, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/usage`);
  const meter = page.locator('.usage');
  await meter.getByText(/ of 0 /).waitFor();
  const shown = await meter.innerText();
  assert.not.match(shown, /NaN|Infinity/, `the usage page reads: ${JSON.stringify(shown)}`);
  assert.match(shown, /No sending is allowed this month/);
  assert.is(await page.getByRole('meter').count(), 0, 'a meter whose maximum is 0');
  await context.close();
});

test.run();
