// The workspace pages in real Chromium: suppressions (add, find, export as CSV, remove),
// members (invite, accept as that member, change the role, remove), what a viewer sees (no
// write control on any page), usage against the allowances, and a form posted to Relay from
// another origin, refused.
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import type { Page, Request } from 'playwright-core';
import { createUser } from '../apps/services/management/users.ts';
import { axeViolations, chromiumMissing, launchBrowser, screenshot, type TestBrowser, type WatchedPage } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { PASSWORD } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; owner: WatchedPage; viewer: WatchedPage; viewerEmail: string }

const test = skippableSuite<Ctx>('dashboard: suppressions, members, viewers, usage and foreign forms in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
  ctx.owner = await ctx.browser.open();
  await signIn(ctx.owner.page, ctx.f);
  ctx.viewerEmail = 'reader@dash.example.test';
  await createUser(ctx.f.t.ctx.documents, { email: ctx.viewerEmail, password: PASSWORD }, new Date());
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const goTo = async (page: Page, f: DashboardFixture, link: string) => {
  await page.goto(`${f.origin}/projects/${f.projectId}/emails`);
  await page.getByRole('link', { name: link, exact: true }).click();
  await page.getByRole('heading', { name: link, level: 1 }).waitFor();
};

test('suppressions: add, find by the beginning of an address, export as CSV, remove', async ({ f, owner: { page, problems } }) => {
  await goTo(page, f, 'Suppressions');
  for (const address of ['bob@other.test', 'Bobby@Other.test', 'carol@other.test']) {
    await page.getByLabel('Address', { exact: true }).fill(address);
    await page.getByRole('button', { name: 'Suppress' }).click();
    await page.getByText(`Suppressed ${address.toLowerCase()}.`).waitFor();
    // Said as soon as Relay answered; the form is let go once the list is drawn again.
    await page.locator('form[aria-label="Add an address"]:not([aria-busy])').waitFor();
  }
  const rows = page.locator('.table-wrap[aria-label="Suppressed addresses"] tbody tr');
  assert.is(await rows.count(), 3);
  assert.match(await rows.first().innerText(), /bob@other\.test\s+manual\s+—/);

  await page.getByLabel('Address begins with').fill('bob');
  await page.getByRole('button', { name: 'Search' }).click();
  await page.waitForURL((url) => url.searchParams.get('prefix') === 'bob');
  await page.getByRole('link', { name: 'Show all' }).waitFor();
  // The search form is drawn before the list's request answers: the list is there once its table is.
  await page.locator('.table-wrap[aria-label="Suppressed addresses"]').waitFor();
  assert.is(await rows.count(), 2);
  assert.not.match(await page.locator('.table-wrap').innerText(), /carol/);

  const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('link', { name: 'Export CSV' }).click()]);
  const csv = readFileSync((await download.path())!, 'utf8');
  assert.match(csv, /^address,reason,email_id,created_at\r\n/);
  assert.match(csv, /\r\nbob@other\.test,manual,,\d{4}-/);
  assert.match(csv, /\r\ncarol@other\.test,manual,,/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'suppressions-search-desktop');

  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Remove bob@other.test' }).click();
  await page.getByText('Removed bob@other.test.').waitFor();
  await page.getByRole('button', { name: 'Remove bob@other.test' }).waitFor({ state: 'detached' });
  assert.is(await rows.count(), 1);
  assert.equal(problems, []);
});

test('members: invite a viewer, who signs in, accepts and sees the workspace without a single write control', async (ctx) => {
  const { f, owner: { page, problems } } = ctx;
  await goTo(page, f, 'Members');
  await page.getByLabel('Email').fill(ctx.viewerEmail);
  await page.getByLabel('Role', { exact: true }).selectOption('viewer');
  await page.getByRole('button', { name: 'Invite' }).click();
  await page.getByText(`Invited ${ctx.viewerEmail}.`).waitFor();
  await page.locator('form[aria-label="Invite someone"]:not([aria-busy])').waitFor();
  assert.match(await page.locator('.table-wrap[aria-label="Pending invitations"]').innerText(), new RegExp(`${ctx.viewerEmail}\\s+viewer`));
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'members-invited-desktop');

  // The invited person, in a browser of their own.
  ctx.viewer = await ctx.browser.open();
  const viewer = ctx.viewer.page;
  await viewer.goto(`${f.origin}/`);
  await viewer.getByLabel('Email').fill(ctx.viewerEmail);
  await viewer.getByLabel('Password').fill(PASSWORD);
  await viewer.getByRole('button', { name: 'Sign in' }).click();
  await viewer.waitForURL(`${f.origin}/invitations`);
  await viewer.getByRole('heading', { name: 'Invitations' }).waitFor();
  assert.equal(await axeViolations(viewer), []);
  await screenshot(viewer, 'invitations-accept-desktop');
  await viewer.getByRole('button', { name: 'Accept the invitation to Acme' }).click();
  await viewer.waitForURL(`${f.origin}/projects/${f.projectId}/emails`);
  assert.match(await viewer.locator('header').innerText(), /viewer/);
  assert.equal(problems, []);
});

test('a viewer sees no write control on any page', async ({ f, viewer: { page, problems } }) => {
  const emailId = await sendEmail(f, { subject: 'For the viewer', html: '<p>Hi</p>' });
  const templates = await f.t.app.inject({
    method: 'POST', url: `/v1/templates?projectId=${f.projectId}`, headers: { cookie: await ownerCookie(f) },
    payload: { name: 'Receipt', slug: 'receipt', subject: 'Receipt {{n}}', text: 'n {{n}}' },
  });
  const templateId = templates.json().id as string;
  const pages: Array<[string, string]> = [
    [`/projects/${f.projectId}/emails`, 'Emails'],
    [`/projects/${f.projectId}/emails/${emailId}`, 'For the viewer'],
    [`/projects/${f.projectId}/emails/${emailId}/message`, 'For the viewer'],
    [`/projects/${f.projectId}/templates`, 'Templates'],
    [`/projects/${f.projectId}/templates/${templateId}`, 'Receipt'],
    [`/projects/${f.projectId}/api-keys`, 'API keys'],
    [`/projects/${f.projectId}/webhooks`, 'Webhooks'],
    [`/workspaces/${f.workspaceId}/domains`, 'Domains'],
    [`/workspaces/${f.workspaceId}/domains/${f.domainId}`, 'dash.example.test'],
    [`/workspaces/${f.workspaceId}/suppressions`, 'Suppressions'],
    [`/workspaces/${f.workspaceId}/members`, 'Members'],
    [`/workspaces/${f.workspaceId}/usage`, 'Usage'],
    [`/workspaces/${f.workspaceId}/projects`, 'Projects'],
  ];
  // What reading needs: navigating, filtering, searching, copying, previewing, signing out, leaving.
  const READING = new Set(['Sign out', 'Switch', 'Apply filters', 'Search', 'Load remote images', 'Copy', 'Leave']);
  for (const [path, heading] of pages) {
    await page.goto(`${f.origin}${path}`);
    await page.getByRole('heading', { name: heading, level: 1 }).waitFor();
    await page.waitForLoadState('networkidle');
    const buttons = await page.getByRole('button').evaluateAll((found) => found.map((b) => (b as { textContent: string }).textContent.trim()));
    const writing = buttons.filter((name) => !READING.has(name));
    assert.equal(writing, [], `${path}: write controls ${writing.join(', ')}`);
    const editable = await page.locator('input:not([readonly]):not([type=search]):not([type=checkbox]), textarea:not([readonly]), select').evaluateAll(
      (found) => found.map((e) => (e as { name: string }).name).filter((name) => !['status', 'limit', 'workspace', 'project', 'variables'].includes(name)));
    assert.equal(editable.filter((name) => !['sender', 'domain', 'recipient', 'after', 'before'].includes(name)), [], `${path}: editable fields`);
    assert.equal(await axeViolations(page), [], path);
  }
  await screenshot(page, 'viewer-projects-desktop');
  assert.equal(problems, []);
});

test('the owner changes the member\'s role and removes them', async ({ f, owner: { page, problems }, viewerEmail }) => {
  await goTo(page, f, 'Members');
  await page.getByLabel(`Role of ${viewerEmail}`).selectOption('developer');
  await page.getByRole('button', { name: `Change role for ${viewerEmail}` }).click();
  await page.getByText(`${viewerEmail} is now developer.`).waitFor();
  // The list drawn again: the member's button there is not the one still running.
  await page.locator(`button[aria-label="Change role for ${viewerEmail}"]:not([aria-busy])`).waitFor();
  const workspace = await f.t.app.inject({ url: `/v1/workspaces/${f.workspaceId}`, headers: { cookie: await ownerCookie(f) } });
  assert.is(workspace.json().members.find((m: { email: string }) => m.email === viewerEmail).role, 'developer');

  // Cancelled: nothing is sent, nothing is said (the last notice stays), the member stays.
  const deletes: string[] = [];
  const onRequest = (request: Request) => void (request.method() === 'DELETE' && deletes.push(request.url()));
  page.on('request', onRequest);
  const asked = new Promise<string>((resolve) => page.once('dialog', (dialog) => {
    resolve(dialog.message());
    void dialog.dismiss();
  }));
  await page.getByRole('button', { name: `Remove ${viewerEmail}` }).click();
  assert.is(await asked, `Remove ${viewerEmail} from the workspace?`);
  // The positive marker: a task of the page after the click's, so whatever the click drew is drawn.
  await page.evaluate('new Promise((resolve) => setTimeout(resolve, 0))');
  page.off('request', onRequest);
  assert.is(await page.getByRole('alert').count(), 0, 'cancelling showed an error');
  assert.is(await page.locator('main .notice').innerText(), `${viewerEmail} is now developer.`);
  assert.equal(deletes, []);
  assert.match(await page.locator('.table-wrap[aria-label="Members"]').innerText(), new RegExp(viewerEmail));

  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: `Remove ${viewerEmail}` }).click();
  await page.getByText(`Removed ${viewerEmail}.`).waitFor();
  await page.getByRole('button', { name: `Remove ${viewerEmail}` }).waitFor({ state: 'detached' });
  assert.not.match(await page.locator('.table-wrap[aria-label="Members"]').innerText(), new RegExp(viewerEmail));
  // The owner is alone: leaving would leave the workspace without one.
  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Leave' }).click();
  await page.getByText('a workspace keeps at least one owner').waitFor();
  assert.equal(problems, []);
});

test('usage: this month\'s recipients against the allowance', async ({ f, owner: { page, problems } }) => {
  await sendEmail(f, { subject: 'Two recipients', to: [`a@${f.domain}`, `b@${f.domain}`] });
  await goTo(page, f, 'Usage');
  const meter = page.getByRole('meter', { name: 'Recipients this month' });
  // An earlier test of this file sent one email of one recipient.
  assert.is(await meter.getAttribute('value'), '3');
  await page.getByText('3 of 5,000').waitFor();
  assert.match(await page.locator('.table-wrap[aria-label="Recipients by key"]').innerText(), /Backend\s+Storefront\s+development\s+3\s+3 of 1,000/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'usage-meter-desktop');
  assert.equal(problems, []);
});

test('a form posted to Relay from another origin is refused, with the owner signed in', async ({ f, owner: { page } }) => {
  // A page of another site, with a form that would suppress an address in the owner's workspace.
  const target = `${f.origin}/v1/workspaces/${f.workspaceId}/suppressions`;
  const foreign: Server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>Win a prize</title>
      <form id="f" method="post" action="${target}" enctype="text/plain"><input name='{"address":"victim@other.test","x":"' value='"}'></form>
      <script>document.getElementById('f').submit()</script>`);
  });
  await new Promise<void>((resolve) => foreign.listen(0, '127.0.0.1', resolve));
  try {
    const answer = page.waitForResponse((response) => response.url() === target && response.request().method() === 'POST');
    await page.goto(`http://127.0.0.1:${(foreign.address() as AddressInfo).port}/`);
    const response = await answer;
    assert.is(response.status(), 403);
    assert.is((await response.json()).error.code, 'origin_not_allowed');
    const list = await f.t.app.inject({ url: `/v1/workspaces/${f.workspaceId}/suppressions`, headers: { cookie: await ownerCookie(f) } });
    assert.not.ok(list.body.includes('victim@other.test'));
  } finally {
    await new Promise((resolve) => foreign.close(resolve));
  }
});

test.run();
