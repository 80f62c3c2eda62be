// Selects that choose, in real Chromium, where an arrow key on a closed select changes it and
// fires "change" at once: a member's role is written only by the row's "Change role" button (a
// change to owner asked first, a cancel putting the select back), and the workspace and project
// switchers go only by their "Switch" buttons.
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { addMember, call, newCaller, type Caller } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; owner: string; member: Caller }
const test = skippableSuite<Ctx>('dashboard: selects that act only when the reader commits', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
  ctx.owner = await ownerCookie(ctx.f);
  ctx.member = await newCaller(ctx.f.t, 'arrow-member@dash.example.test');
  await addMember(ctx.f.t, { userId: ctx.f.owner.userId, email: ctx.f.owner.email, cookie: ctx.owner }, ctx.f.workspaceId, ctx.member, 'admin');
  for (const name of ['Second', 'Third']) await call(ctx.f.t, 'POST', '/v1/workspaces', { as: ctx.owner, body: { name } });
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const roleOf = async ({ f, owner, member }: Ctx) =>
  (await call(f.t, 'GET', `/v1/workspaces/${f.workspaceId}`, { as: owner })).json().members.find((m: { email: string }) => m.email === member.email).role as string;

/** A request of the page's own, answered: whatever a key press before it started has been sent by now. */
const pageRoundTrip = (page: Page, path: string) => page.evaluate(`fetch('${path}').then((r) => r.text())`);

test('an arrow key on a member\'s role writes nothing; "Change role" does, asking first for owner, and keeps focus on the row', async (ctx) => {
  const { f, browser, member } = ctx;
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const writes: string[] = [];
  page.on('request', (request) => void (request.method() === 'PATCH' && writes.push(`${new URL(request.url()).pathname} ${request.postData()}`)));
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/members`);
  const role = page.getByLabel(`Role of ${member.email}`);
  const change = page.getByRole('button', { name: `Change role for ${member.email}` });

  // An admin; the options read owner, admin, developer, viewer: one step up is "owner".
  await role.focus();
  await page.keyboard.press('ArrowUp');
  assert.is(await role.inputValue(), 'owner');
  await pageRoundTrip(page, `/v1/workspaces/${f.workspaceId}`);
  assert.equal(writes, [], 'one ArrowUp on the role select wrote');

  // Committed to owner: asked, cancelled, nothing sent and the select back to the role the member has.
  const asked = new Promise<string>((resolve) => page.once('dialog', (dialog) => {
    resolve(dialog.message());
    void dialog.dismiss();
  }));
  await change.click();
  assert.match(await asked, new RegExp(`^Make ${member.email} an owner\\?`));
  assert.is(await role.inputValue(), 'admin');
  await pageRoundTrip(page, `/v1/workspaces/${f.workspaceId}`);
  assert.equal(writes, []);
  assert.is(await roleOf(ctx), 'admin');

  // Another role is written at the button alone, with the keyboard; focus stays on the member's row.
  await role.focus();
  await page.keyboard.press('ArrowDown');
  await change.focus();
  await page.keyboard.press('Enter');
  await page.getByRole('status').getByText(`${member.email} is now developer.`).waitFor();
  // Said as soon as Relay answered; the list is drawn again after it (the member's button there is not the one still running).
  await page.locator(`button[aria-label="Change role for ${member.email}"]:not([aria-busy])`).waitFor();
  assert.is(await roleOf(ctx), 'developer');
  assert.is(writes.length, 1);
  assert.is(await page.evaluate("document.activeElement.getAttribute('aria-label')"), `Change role for ${member.email}`);
  assert.equal(problems, []);
  await context.close();
});

test('an arrow key on the workspace switcher stays on the page; "Switch" goes', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/members`);
  await page.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
  const navigations: string[] = [];
  page.on('request', (request) => void (request.isNavigationRequest() && request.frame() === page.mainFrame() && navigations.push(request.url())));
  const switcher = page.locator('#switch-workspace');
  await switcher.focus();
  await page.keyboard.press('ArrowDown');
  const chosen = await switcher.inputValue();
  assert.is.not(chosen, f.workspaceId);
  // Answered, or cut short by a navigation the key press started: either way that one is seen by now.
  await pageRoundTrip(page, '/v1/session').catch(() => 'the page navigated away');
  assert.equal(navigations, [], 'one ArrowDown on the workspace switcher left the page');

  await page.getByRole('button', { name: 'Switch workspace' }).press('Enter');
  await page.waitForURL((url) => url.pathname.startsWith(`/workspaces/${chosen}`));
  assert.equal(problems, []);
  await context.close();
});

test.run();
