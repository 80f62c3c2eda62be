// A member removed from a workspace while a page of it that follows changes is open (the email
// list, an email's timeline, a webhook endpoint's deliveries: apps/dashboard/client/live.ts) is
// told so. Once a refresh is answered 403 forbidden "you are not a member of the workspace this
// belongs to", a notice at the top of the page says that access to the workspace was removed,
// with a link that leads to the workspaces the reader still has (here none: their invitations),
// and the page stops reading again, rather than showing the last view as if it were live or
// asking for good (docs/dashboard.md, "When access to the workspace is removed").
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { call, newCaller, PASSWORD, type Caller } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { waitUntil } from './support/eventually.ts';

const HOOKS = 'hooks.relay.test';

interface Ctx { f: DashboardFixture; browser: TestBrowser; dns: TestDnsServer; owner: string; n: number }
const test = skippableSuite<Ctx>('dashboard: a member removed while a live page of the workspace is open', chromiumMissing);

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([{ name: HOOKS, type: 'A', data: '127.0.0.1' }]);
  ctx.f = await startDashboard({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOOKS}:443` }, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
  ctx.owner = await ownerCookie(ctx.f);
  ctx.n = 0;
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.dns?.close();
});

/** A new developer of the fixture's workspace (invited by the owner, accepted). */
async function developer(ctx: Ctx): Promise<Caller> {
  const member = await newCaller(ctx.f.t, `leaving-dev${++ctx.n}@dash.example.test`);
  const invited = await call(ctx.f.t, 'POST', `/v1/workspaces/${ctx.f.workspaceId}/members`, { as: ctx.owner, body: { email: member.email, role: 'developer' } });
  assert.is(invited.statusCode, 201, invited.body);
  const accepted = await call(ctx.f.t, 'POST', `/v1/invitations/${invited.json().id}/accept`, { as: member });
  assert.is(accepted.statusCode, 200, accepted.body);
  return member;
}

const REMOVED = /Your access to the workspace Acme was removed/;

/**
 * Opens `path` as `member` on a page clock the test moves, waits for `drawn`, removes the member
 * through the API, and moves the clock until the notice shows. Then checks that the page read
 * `live` no more: the clock moved two minutes on (four times the longest wait between refreshes),
 * and a request the test makes from the page afterwards is seen, so any read of `live` made
 * before it would have been seen too.
 */
async function removedWhileOpen(ctx: Ctx, member: Caller, path: string, live: string, drawn: (page: Page) => Promise<void>) {
  const { f, browser } = ctx;
  const { page, context, problems } = await browser.open();
  await signIn(page, f, { email: member.email, password: PASSWORD });
  let reads = 0;
  let refused = 0;
  let marks = 0;
  page.on('request', (request) => {
    const at = new URL(request.url()).pathname;
    if (request.method() === 'GET' && at === live) reads++;
    if (at === '/v1/session' && request.method() === 'GET') marks++;
  });
  page.on('response', (response) => {
    if (new URL(response.url()).pathname === live && response.status() === 403) refused++;
  });
  await page.clock.install();
  await page.goto(`${f.origin}${path}`);
  await drawn(page);
  await waitUntil(() => reads > 0, `the page read ${live}`);

  const removed = await call(f.t, 'DELETE', `/v1/workspaces/${f.workspaceId}/members/${member.userId}`, { as: ctx.owner });
  assert.is(removed.statusCode, 200, removed.body);
  await waitUntil(async () => (await page.getByText(REMOVED).count()) > 0 || (await page.clock.runFor(1000), false),
    'the page says that access to the workspace was removed', 60_000);
  assert.ok(refused >= 1, `a refresh of ${live} was refused 403 (${refused})`);
  assert.match(await page.locator('.session-status').innerText(), /You are no longer a member of it/);

  const readsThen = reads;
  await page.clock.runFor(120_000);
  const marksThen = marks;
  await page.evaluate(() => fetch('/v1/session').then((response) => response.status));
  await waitUntil(() => marks > marksThen, 'the test\'s own request from the page was seen');
  assert.is(reads, readsThen, `reads of ${live} after the notice (the page should have stopped following)`);
  assert.equal(problems, []);
  return { page, context };
}

test('the open email list: a notice that access was removed, no more refreshes, and a way to the reader\'s workspaces', async (ctx) => {
  await sendEmail(ctx.f, { subject: 'Order 1001' });
  const member = await developer(ctx);
  const { page, context } = await removedWhileOpen(ctx, member, `/projects/${ctx.f.projectId}/emails`, `/v1/projects/${ctx.f.projectId}/emails`,
    (p) => p.getByRole('link', { name: 'Order 1001' }).waitFor());
  // The way out: the dashboard's home, which leads to a workspace the reader still has, or (none
  // here) to their invitations.
  await page.getByRole('link', { name: 'Go to your workspaces' }).click();
  await page.waitForURL((url) => url.pathname === '/invitations');
  await context.close();
});

test('an email\'s timeline: the same', async (ctx) => {
  const id = await sendEmail(ctx.f, { subject: 'Order 1002' });
  const member = await developer(ctx);
  const { context } = await removedWhileOpen(ctx, member, `/projects/${ctx.f.projectId}/emails/${id}`, `/v1/projects/${ctx.f.projectId}/emails/${id}`,
    (p) => p.getByRole('heading', { name: 'Order 1002', level: 1 }).waitFor());
  await context.close();
});

test('a webhook endpoint\'s deliveries: the same', async (ctx) => {
  const { f, dns } = ctx;
  const { endpoint } = await createEndpoint(f.t.ctx.documents, f.t.ctx.services.secrets, { dnsServers: [dns.address], allow: f.t.config.webhookAllow }, {
    workspaceId: f.workspaceId, projectId: f.projectId, url: `https://${HOOKS}/events`, events: ['email.sent'],
  }, new Date());
  const member = await developer(ctx);
  const { context } = await removedWhileOpen(ctx, member, `/projects/${f.projectId}/webhooks/${endpoint._id}`, `/v1/webhook-endpoints/${endpoint._id}/deliveries`,
    (p) => p.getByRole('heading', { name: 'Recent deliveries' }).waitFor());
  await context.close();
});

test.run();
