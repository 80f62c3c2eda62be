// A webhook endpoint's settings form in real Chromium, while the endpoint's host does not resolve
// (its DNS records were taken down after it was made): the URL is checked again whenever a PATCH
// sends it (MANAGEMENT-API.md: 422 unsafe_destination), so the form sends it only when it was
// changed. Editing the events and the description saves; changing the URL is still refused.
import * as assert from 'uvu/assert';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const HOST = 'hooks.relay.test';
const URL_AS_MADE = `https://${HOST}/events`;

interface Ctx { f: DashboardFixture; browser: TestBrowser; dns: TestDnsServer }
const test = skippableSuite<Ctx>('dashboard: a webhook endpoint\'s settings while its host does not resolve', chromiumMissing);

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.f = await startDashboard({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:443` });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.dns?.close();
});

test('events and description are saved without the URL; a changed URL is sent and refused', async ({ f, browser, dns }) => {
  const { endpoint } = await createEndpoint(f.t.ctx.documents, f.t.ctx.services.secrets, { dnsServers: [dns.address], allow: f.t.config.webhookAllow }, {
    workspaceId: f.workspaceId, projectId: f.projectId, url: URL_AS_MADE, events: ['email.sent'],
  }, new Date());
  dns.setZone([]);
  const cookie = await ownerCookie(f);
  const stored = async () => (await fetch(`${f.t.url}/v1/webhook-endpoints/${endpoint._id}`, { headers: { cookie } })).json() as Promise<{ url: string; events: string[]; description: string | null }>;
  // The API itself refuses the URL now, unchanged as it is.
  const resent = await fetch(`${f.t.url}/v1/webhook-endpoints/${endpoint._id}`, {
    method: 'PATCH', headers: { cookie, 'content-type': 'application/json' }, body: JSON.stringify({ url: URL_AS_MADE }),
  });
  assert.is(resent.status, 422, 'the host no longer resolves');

  const { page, problems, context } = await browser.open();
  const patches: Array<Record<string, unknown>> = [];
  page.on('request', (request) => {
    if (request.method() === 'PATCH') patches.push(JSON.parse(request.postData() ?? '{}'));
  });
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/webhooks/${endpoint._id}`);
  await page.getByRole('heading', { name: URL_AS_MADE, level: 1 }).waitFor();

  await page.getByLabel('email.bounced', { exact: true }).check();
  await page.getByLabel('Description').fill('Order service');
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved.').waitFor();
  assert.equal(patches, [{ events: ['email.sent', 'email.bounced'], description: 'Order service' }], 'the unchanged URL was not sent');
  const saved = await stored();
  assert.equal([saved.url, saved.events, saved.description], [URL_AS_MADE, ['email.sent', 'email.bounced'], 'Order service']);

  // Saved again without a change: still without the URL.
  await page.getByLabel('email.bounced', { exact: true }).uncheck();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await waitUntil(async () => /Events\s+email\.sent\s/.test(await page.locator('dl.facts').innerText()), 'the page shows the events saved', 10_000);
  assert.is(patches.length, 2);
  assert.not.ok('url' in patches[1]);

  // A changed URL is sent, and checked: refused while the host does not resolve.
  await page.getByLabel('URL').fill(`https://${HOST}/other`);
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText(`${HOST} must resolve to public addresses only`).waitFor();
  assert.is(patches.length, 3);
  assert.is(patches[2].url, `https://${HOST}/other`);
  assert.is((await stored()).url, URL_AS_MADE);
  assert.equal(problems, []);
  await context.close();
});

test.run();
