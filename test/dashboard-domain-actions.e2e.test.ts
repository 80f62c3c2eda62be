// The domain page's actions in real Chromium, against a DNS server the test runs: a button held
// while its request runs (a double click starts one DKIM rotation, not a rotation and a 409),
// a confirmation before what cannot be taken back at one click (disconnecting a project,
// cancelling a rotation), and what a verify says while a rotation is pending and when it
// completes one. The tests run in order on one domain, each leaving it with no rotation pending.
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; dns: TestDnsServer }
const test = skippableSuite<Ctx>('dashboard: a domain\'s actions in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.f = await startDashboard({ RELAY_DNS_SERVERS: ctx.dns.address });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.dns?.close();
});

interface StoredDomain {
  dkimSelector: string;
  records: Array<{ type: string; name: string; value: string; priority?: number }>;
  dkimRotation: { selector: string; record: { name: string; value: string } } | null;
}
const stored = async (f: DashboardFixture) =>
  (await (await fetch(`${f.t.url}/v1/domains/${f.domainId}`, { headers: { cookie: await ownerCookie(f) } })).json()) as StoredDomain;

async function openDomain(page: Page, f: DashboardFixture): Promise<void> {
  await signIn(page, f);
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/domains/${f.domainId}`);
  await page.getByRole('heading', { name: f.domain, level: 1 }).waitFor();
}

/** Clicks the button and dismisses the confirmation it asks (failing, after the page's timeout, when it asks none); its question. */
async function dismissed(page: Page, button: string): Promise<string> {
  const asked = page.waitForEvent('dialog');
  const clicked = page.getByRole('button', { name: button }).click();
  const dialog = await asked;
  const question = dialog.message();
  await dialog.dismiss();
  await clicked;
  return question;
}

test('a double click on "Rotate DKIM key" starts one rotation and says so, with no error', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await openDomain(page, f);
  const posts: number[] = [];
  page.on('response', (r) => void (r.url().endsWith('/dkim-rotation') && r.request().method() === 'POST' && posts.push(r.status())));

  await page.getByRole('button', { name: 'Rotate DKIM key' }).dblclick();
  await page.getByRole('button', { name: 'Cancel rotation' }).waitFor();
  await page.waitForLoadState('networkidle');
  assert.equal(await page.getByRole('alert').allInnerTexts(), [], `POST answers: ${posts.join(', ')}`);
  assert.equal(posts, [201]);
  await page.getByText('New DKIM key made: publish its record. Relay looks for it every few minutes and switches to the new key once it is there; “Verify DNS records” looks now.').waitFor();
  assert.equal(problems, []);
  await context.close();
});

test('"Cancel rotation" says the new key is discarded and asks first: dismissed, the rotation stays', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await openDomain(page, f);
  const pending = (await stored(f)).dkimRotation!;
  const deletes: string[] = [];
  page.on('request', (r) => void (r.method() === 'DELETE' && deletes.push(r.url())));

  const question = await dismissed(page, 'Cancel rotation');
  assert.match(question, new RegExp(`new key \\(selector ${pending.selector}\\) is discarded: a record you published for it is of no use`));
  // The positive marker: a task of the page after the click's, so whatever the click drew is drawn.
  await page.evaluate('new Promise((resolve) => setTimeout(resolve, 0))');
  assert.equal(deletes, []);
  assert.is((await stored(f)).dkimRotation?.selector, pending.selector);

  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Cancel rotation' }).click();
  await page.getByText('Rotation cancelled.').waitFor();
  await page.getByRole('button', { name: 'Rotate DKIM key' }).waitFor();
  assert.is((await stored(f)).dkimRotation, null);
  assert.equal(problems, []);
  await context.close();
});

test('"Disconnect" says the project\'s sends will be refused and asks first: dismissed, the project still sends', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await openDomain(page, f);
  assert.match(await dismissed(page, 'Disconnect Storefront'), new RegExp(`every send of Storefront from ${f.domain.replace(/\./g, '\\.')} is refused`));
  await page.evaluate('new Promise((resolve) => setTimeout(resolve, 0))');
  await sendEmail(f, {});

  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Disconnect Storefront' }).click();
  await page.getByText('Disconnected.').waitFor();
  await sendEmail(f, {}).then(() => assert.unreachable('a disconnected project sent'), (error: Error) => assert.match(error.message, /sender_not_allowed/));
  // Connecting takes nothing away: it is not asked.
  await page.getByRole('button', { name: 'Connect Storefront' }).click();
  await page.getByText('Connected.').waitFor();
  await sendEmail(f, {});
  assert.equal(problems, []);
  await context.close();
});

test('a verify that does not find the new key\'s record says so; one that finds it says the new key is active', async ({ f, browser, dns }) => {
  const { page, problems, context } = await browser.open();
  const current = await stored(f);
  const published = current.records.map((r): ZoneRecord => (r.type === 'MX'
    ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
    : { name: r.name, type: 'TXT', data: r.value }));
  // Every current record is published; the new key's record is not (yet).
  dns.setZone(published);
  await openDomain(page, f);
  await page.getByRole('button', { name: 'Rotate DKIM key' }).click();
  await page.getByText('New DKIM key made: publish its record. Relay looks for it every few minutes and switches to the new key once it is there; “Verify DNS records” looks now.').waitFor();
  const rotation = (await stored(f)).dkimRotation!;

  await page.getByRole('button', { name: 'Verify DNS records' }).click();
  const newKey = page.locator('.table-wrap[aria-label="New DKIM key"]');
  await newKey.getByText('missing', { exact: true }).waitFor();
  await page.getByRole('button', { name: 'Cancel rotation' }).waitFor();
  const said = await page.locator('main .notice').first().innerText();
  assert.match(said, new RegExp(`^The new DKIM key's record was not found \\(.+\\): mail is still signed with selector ${current.dkimSelector}\\.`));
  assert.match(said, /Verified: every required record/, 'the domain\'s own records are still reported');

  dns.setZone([...published, { name: rotation.record.name, type: 'TXT', data: rotation.record.value.match(/.{1,255}/g)! }]);
  await page.getByRole('button', { name: 'Verify DNS records' }).click();
  await page.getByText(`The new DKIM key is active: mail is now signed with selector ${rotation.selector}.`).waitFor();
  await page.getByRole('button', { name: 'Rotate DKIM key' }).waitFor();
  assert.equal(problems, []);
  await context.close();
});

test.run();
