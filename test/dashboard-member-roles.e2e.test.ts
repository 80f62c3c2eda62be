// A role change on the members page that Relay refuses, in real Chromium: a role is picked in a
// select and sent by the row's "Change role" button, so after a refusal (here an owner made that member an owner meanwhile, and
// admins may not change owners) the list is drawn again from Relay, showing the role the member
// really has and only the controls the reader may use on them.
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { call, newCaller, type Caller } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; admin: Caller; member: Caller }
const test = skippableSuite<Ctx>('dashboard: a refused role change in Chromium', chromiumMissing);

async function join(f: DashboardFixture, owner: string, who: Caller, role: string): Promise<void> {
  const invited = await call(f.t, 'POST', `/v1/workspaces/${f.workspaceId}/members`, { as: owner, body: { email: who.email, role } });
  if (invited.statusCode !== 201) throw new Error(`invite: ${invited.statusCode} ${invited.body}`);
  const accepted = await call(f.t, 'POST', `/v1/invitations/${invited.json().id}/accept`, { as: who });
  if (accepted.statusCode !== 200) throw new Error(`accept: ${accepted.statusCode} ${accepted.body}`);
}

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
  const owner = await ownerCookie(ctx.f);
  ctx.admin = await newCaller(ctx.f.t, 'admin@dash.example.test');
  ctx.member = await newCaller(ctx.f.t, 'dev@dash.example.test');
  await join(ctx.f, owner, ctx.admin, 'admin');
  await join(ctx.f, owner, ctx.member, 'developer');
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

test('after a refused change the list shows the role the member really has, and no control for it', async ({ f, browser, admin, member }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f, { email: admin.email, password: 'correct horse battery staple' });
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/members`);
  await page.getByRole('heading', { name: 'Members', level: 1 }).waitFor();
  const role = page.getByLabel(`Role of ${member.email}`);
  await role.waitFor();

  // Meanwhile, in the owner's browser: the developer becomes an owner.
  const promoted = await call(f.t, 'PATCH', `/v1/workspaces/${f.workspaceId}/members/${member.userId}`, { as: await ownerCookie(f), body: { role: 'owner' } });
  assert.is(promoted.statusCode, 200);

  await role.selectOption('viewer');
  await page.getByRole('button', { name: `Change role for ${member.email}` }).click();
  const error = page.getByRole('alert');
  await error.waitFor();
  assert.match(await error.innerText(), /owner/);
  const row = page.locator('.table-wrap[aria-label="Members"] tr', { hasText: member.email });
  await row.getByRole('cell', { name: 'owner', exact: true }).waitFor();
  assert.is(await role.count(), 0, 'an admin is offered a role change of an owner');
  assert.is(await row.getByRole('button', { name: `Remove ${member.email}` }).count(), 0);
  assert.equal(problems, []);
  await context.close();
});

test.run();
