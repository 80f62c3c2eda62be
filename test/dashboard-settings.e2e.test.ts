// Domains, API keys and webhook endpoints in the dashboard, in real Chromium: a domain's records
// with copy buttons, verified against a DNS server the test runs (missing first, then published);
// a key whose secret is shown once and works until revoked; a webhook endpoint whose secret is
// shown once, and whose page shows the attempts and the receiver's status codes after a send (a
// real HTTPS receiver answering 500 once, then 200).
import * as assert from 'uvu/assert';
import { axeViolations, chromiumMissing, launchBrowser, screenshot, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { startDnsServer, type TestDnsServer, type ZoneRecord } from './support/dns-server.ts';
import { waitUntil } from './support/eventually.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; dns: TestDnsServer; ca: TestCa; receiver: HttpsReceiver }

const test = skippableSuite<Ctx>('dashboard: domains, API keys and webhook endpoints in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.dns = await startDnsServer([]);
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  ctx.f = await startDashboard({
    RELAY_DNS_SERVERS: ctx.dns.address,
    RELAY_WEBHOOK_ALLOW: `localhost:${ctx.receiver.port}`,
    RELAY_WEBHOOK_RETRY_SCALE: '0.0001',
  }, { processors: true });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.receiver?.close();
  await ctx.dns?.close();
  ctx.ca?.remove();
});

test('a domain: records with copy buttons, verify shows each record missing, then verified once published; connect a project', async ({ f, browser, dns }) => {
  const { page, problems, context } = await browser.open();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: f.origin });
  await signIn(page, f);
  await page.getByRole('link', { name: 'Domains' }).click();
  await page.getByRole('link', { name: 'dash.example.test' }).waitFor();
  await page.getByLabel('Domain name').fill('News.Example.test');
  await page.getByRole('button', { name: 'Add domain' }).click();
  await page.getByRole('heading', { name: 'news.example.test', level: 1 }).waitFor();
  const domainId = new URL(page.url()).pathname.split('/').pop()!;

  // The copy button puts exactly the record's value on the clipboard.
  const stored = await (await fetch(`${f.t.url}/v1/domains/${domainId}`, { headers: { cookie: await ownerCookie(f) } })).json() as { records: Array<{ purpose: string; type: string; name: string; value: string; priority?: number }> };
  const dkim = stored.records.find((r) => r.purpose === 'dkim')!;
  await page.getByRole('button', { name: 'Copy dkim record value' }).click();
  assert.is(await page.evaluate('navigator.clipboard.readText()'), dkim.value);
  await page.getByRole('button', { name: 'Copy dkim record name' }).click();
  assert.is(await page.evaluate('navigator.clipboard.readText()'), dkim.name);

  await page.getByRole('button', { name: 'Verify DNS records' }).click();
  await page.getByText('Not verified yet: 3 required records are not as expected.').waitFor();
  const records = page.locator('.table-wrap[aria-label="Records to publish"]');
  assert.is(await records.getByText('missing', { exact: true }).count(), 4);
  assert.ok(dns.queries.some((q) => q.name === dkim.name), 'Relay asked the test DNS server');
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'domain-verify-missing-desktop');

  dns.setZone(stored.records.map((r): ZoneRecord => (r.type === 'MX'
    ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
    : { name: r.name, type: 'TXT', data: r.value })));
  await page.getByRole('button', { name: 'Verify DNS records' }).click();
  await page.getByText('Verified: every required record of news.example.test is published.').waitFor();
  assert.is(await records.getByText('ok', { exact: true }).count(), 4);
  await page.getByRole('button', { name: 'Connect Storefront' }).click();
  await page.getByText('Connected.').waitFor();
  await page.getByRole('button', { name: 'Disconnect Storefront' }).waitFor();

  // DKIM key rotation: the new record shown to copy; a verify that finds it switches the key.
  await page.getByText(`Mail is signed with selector ${dkim.name.split('.')[0]}.`).waitFor();
  await page.getByRole('button', { name: 'Rotate DKIM key' }).click();
  await page.getByText('New DKIM key made: publish its record. Relay looks for it every few minutes and switches to the new key once it is there; “Verify DNS records” looks now.').waitFor();
  const { dkimRotation: rotation } = await (await fetch(`${f.t.url}/v1/domains/${domainId}`, { headers: { cookie: await ownerCookie(f) } })).json() as {
    dkimRotation: { selector: string; record: { name: string; value: string } };
  };
  await page.getByRole('button', { name: 'Copy new dkim record value' }).click();
  assert.is(await page.evaluate('navigator.clipboard.readText()'), rotation.record.value);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'domain-dkim-rotation-desktop');
  dns.setZone([
    ...stored.records.map((r): ZoneRecord => (r.type === 'MX'
      ? { name: r.name, type: 'MX', data: { preference: r.priority ?? 10, exchange: r.value } }
      : { name: r.name, type: 'TXT', data: r.value })),
    { name: rotation.record.name, type: 'TXT', data: rotation.record.value.match(/.{1,255}/g)! },
  ]);
  await page.getByRole('button', { name: 'Verify DNS records' }).click();
  await page.getByText(`Mail is signed with selector ${rotation.selector}.`).waitFor();
  await page.getByText(`Retired: ${dkim.name}.`, { exact: false }).waitFor();
  assert.equal(problems, []);
  await context.close();
});

test('an API key: created with its permissions, the secret shown once and working, then revoked', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: f.origin });
  await signIn(page, f);
  await page.getByRole('link', { name: 'API keys' }).click();
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  await page.getByLabel('Name').fill('Read-only reporting');
  await page.getByLabel('email:send').uncheck();
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByText('Copy it now: it is shown this once').waitFor();
  const secret = await page.locator('.secret .copy-value').innerText();
  assert.match(secret, /^rr_test_[A-Za-z0-9_-]{43}$/);
  await page.getByRole('button', { name: 'Copy the new API key' }).click();
  assert.is(await page.evaluate('navigator.clipboard.readText()'), secret);
  const row = page.locator('tr', { hasText: 'Read-only reporting' });
  assert.match(await row.innerText(), /email:read\s/);
  assert.not.match(await row.innerText(), /email:send/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'api-key-secret-once-desktop');
  const list = (key: string) => fetch(`${f.t.url}/v1/emails`, { headers: { authorization: `Bearer ${key}` } });
  assert.is((await list(secret)).status, 200);

  await page.reload();
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  await row.waitFor();
  assert.not.ok((await page.content()).includes(secret), 'the secret is shown only once');
  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Revoke Read-only reporting' }).click();
  await page.getByText('Revoked Read-only reporting.').waitFor();
  await page.getByRole('button', { name: 'Revoke Read-only reporting' }).waitFor({ state: 'detached' });
  assert.match(await row.innerText(), /revoked/);
  assert.is((await list(secret)).status, 401);
  assert.equal(problems, []);
  await context.close();
});

test('a webhook endpoint: secret once, then after a send its page shows each attempt with the receiver\'s status code', async ({ f, browser, receiver }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.getByRole('link', { name: 'Webhooks' }).click();
  await page.getByText('No endpoint yet.').waitFor();
  const url = `https://localhost:${receiver.port}/hooks`;
  await page.getByLabel('URL').fill(url);
  for (const event of ['email.delivered', 'email.bounced', 'email.complained', 'email.rejected', 'email.failed', 'email.delayed', 'email.suppressed']) {
    await page.getByLabel(event, { exact: true }).uncheck();
  }
  await page.getByLabel('Description').fill('Order service');
  await page.getByRole('button', { name: 'Add endpoint' }).click();
  await page.getByText('Copy the signing secret now').waitFor();
  const firstSecret = await page.locator('.secret .copy-value').innerText();
  assert.match(firstSecret, /\S{20,}/);
  await page.getByRole('link', { name: 'Open the endpoint' }).click();
  await page.getByRole('heading', { name: url, level: 1 }).waitFor();
  assert.not.ok((await page.content()).includes(firstSecret));

  let answered = 0;
  receiver.answer = () => (++answered === 1 ? { status: 500 } : { status: 200 });
  const emailId = await sendEmail(f, { subject: 'Hooked' });
  await waitUntil(() => receiver.requests.filter((r) => r.body.includes(emailId)).length >= 2, 'the receiver got the event twice (500, then 200)', 30_000);
  // Nobody reloads: the page follows the deliveries.
  const row = page.locator('tr', { hasText: emailId });
  await row.getByText('succeeded').waitFor();
  assert.match(await row.innerText(), /email\.sent\s+succeeded\s+2\s+HTTP 200/);
  await page.getByText(`Attempts of email.sent for ${emailId} (2)`).click();
  const attempts = page.locator('details[open] tbody tr');
  assert.match(await attempts.nth(0).innerText(), /^1\s+HTTP 500/);
  assert.match(await attempts.nth(1).innerText(), /^2\s+HTTP 200/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'webhook-attempts-desktop');

  // Edit events, disable and enable, rotate the secret.
  await page.getByLabel('email.bounced', { exact: true }).check();
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved.').waitFor();
  assert.match(await page.locator('dl.facts').innerText(), /email\.sent, email\.bounced/);
  await page.getByRole('button', { name: 'Disable' }).click();
  await page.getByText('Disabled: pending deliveries end').waitFor();
  await page.getByRole('button', { name: 'Enable' }).click();
  await page.getByText('Enabled: new events are delivered again.').waitFor();
  page.once('dialog', (dialog) => void dialog.accept());
  await page.getByRole('button', { name: 'Rotate secret' }).click();
  await page.getByText('Copy the signing secret now').waitFor();
  const rotated = await page.locator('.secret .copy-value').innerText();
  assert.is.not(rotated, firstSecret);
  // Shown only this once: the next action's word does not take its place.
  await page.getByRole('button', { name: 'Save changes' }).click();
  await page.getByText('Saved.').waitFor();
  assert.is(await page.locator('.secret .copy-value').innerText(), rotated);
  // The email's own page shows the same attempts.
  await page.getByRole('link', { name: emailId }).click();
  await page.getByRole('heading', { name: 'Hooked', level: 1 }).waitFor();
  assert.match(await page.locator('.delivery').first().innerText(), /succeeded[\s\S]*HTTP 500[\s\S]*HTTP 200/);
  assert.equal(problems, []);
  await context.close();
});

test.run();
