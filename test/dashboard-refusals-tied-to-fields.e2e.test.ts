// A form's refusal that names one of its fields ("body.<field>: …" first in the message) is tied
// to that field whatever its code, as docs/dashboard.md ("Actions") says: the field is
// aria-invalid="true", described by its hint (where it has one) and the refusal, and focused, so
// that a screen reader user going back to it hears "invalid entry" and the reason (WCAG 2.1 3.3.1
// Error Identification, 3.3.3 Error Suggestion, 1.3.1 Info and Relationships). Guarded here for
// refusals that are no validation_error:
// - 422 unsafe_destination, a webhook URL whose host no longer resolves to public addresses
//   ("body.url: … must resolve to public addresses only"), on the "Add an endpoint" form and an
//   endpoint's settings form;
// - 409 conflict, a template slug another template of the project has ("body.slug: "welcome" is
//   already used by another template of this project"), on the template editor.
import * as assert from 'uvu/assert';
import type { Locator, Page } from 'playwright-core';
import { createEndpoint } from '../apps/services/webhooks/endpoints.ts';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { startDnsServer, type TestDnsServer } from './support/dns-server.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const HOST = 'hooks.relay.test';

interface Ctx { f: DashboardFixture; browser: TestBrowser; dns: TestDnsServer }
const test = skippableSuite<Ctx>('dashboard: a refusal that names a field is tied to it, whatever its code', chromiumMissing);

test.before(async (ctx) => {
  // The webhook host resolves when an endpoint is made, then its record is taken down.
  ctx.dns = await startDnsServer([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  ctx.f = await startDashboard({ RELAY_DNS_SERVERS: ctx.dns.address, RELAY_WEBHOOK_ALLOW: `${HOST}:443` });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.dns?.close();
});

/** What assistive technology is told about `field` once the refusal saying `refused` is shown. */
async function refusedFieldState(page: Page, field: Locator, refused: string) {
  const refusal = page.getByRole('alert').filter({ hasText: refused });
  await refusal.waitFor();
  const refusalId = await refusal.getAttribute('id');
  return {
    refusalId,
    invalid: await field.getAttribute('aria-invalid'),
    describedBy: (await field.getAttribute('aria-describedby'))?.split(/\s+/) ?? [],
    focused: await field.evaluate((element) => element === element.ownerDocument.activeElement),
  };
}

function assertTied(state: Awaited<ReturnType<typeof refusedFieldState>>, name: string, hintId?: string | null): void {
  assert.ok(state.refusalId, 'the refusal has an id to be referred to');
  assert.is(state.invalid, 'true', `input[name=${name}] aria-invalid`);
  const expected = [hintId, state.refusalId].filter(Boolean);
  assert.equal(state.describedBy, expected, `input[name=${name}] aria-describedby: its hint, then the refusal`);
  assert.ok(state.focused, `focus is moved to input[name=${name}]`);
}

test('"Add an endpoint": a URL refused as an unsafe destination (422) is marked invalid, described by the refusal and focused (page /projects/:p/webhooks)', async ({ f, browser, dns }) => {
  dns.setZone([]);
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/webhooks`);
  const url = page.getByLabel('URL', { exact: true });
  const hint = await url.getAttribute('aria-describedby');
  await url.fill(`https://${HOST}/events`);
  await page.getByRole('button', { name: 'Add endpoint' }).press('Enter');
  assertTied(await refusedFieldState(page, url, 'must resolve to public addresses only'), 'url', hint);
  // Typing in it again takes the mark away.
  await url.press('End');
  await url.press('s');
  assert.is(await url.getAttribute('aria-invalid'), null);
  assert.is(await url.getAttribute('aria-describedby'), hint);
  assert.equal(problems, []);
  await context.close();
});

test('an endpoint\'s settings: a changed URL refused as an unsafe destination (422) is marked invalid, described by the refusal and focused (page /projects/:p/webhooks/:id)', async ({ f, browser, dns }) => {
  dns.setZone([{ name: HOST, type: 'A', data: '127.0.0.1' }]);
  const { endpoint } = await createEndpoint(f.t.ctx.documents, f.t.ctx.services.secrets, { dnsServers: [dns.address], allow: f.t.config.webhookAllow }, {
    workspaceId: f.workspaceId, projectId: f.projectId, url: `https://${HOST}/events`, events: ['email.sent'],
  }, new Date());
  dns.setZone([]);
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/webhooks/${endpoint._id}`);
  await page.getByRole('heading', { name: `https://${HOST}/events`, level: 1 }).waitFor();
  const url = page.getByLabel('URL', { exact: true });
  const hint = await url.getAttribute('aria-describedby');
  await url.fill(`https://${HOST}/other`);
  await page.getByRole('button', { name: 'Save changes' }).press('Enter');
  assertTied(await refusedFieldState(page, url, 'must resolve to public addresses only'), 'url', hint);
  assert.equal(problems, []);
  await context.close();
});

test('page /projects/:p/templates/new: "Create template" refused for a taken slug (409 conflict) marks input[name=slug] invalid, described and focused', async ({ f, browser }) => {
  const made = await fetch(`${f.t.url}/v1/templates?projectId=${f.projectId}`, {
    method: 'POST',
    headers: { cookie: await ownerCookie(f), origin: f.origin, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Welcome', slug: 'welcome', subject: 'Welcome', text: 'Hello' }),
  });
  assert.is(made.status, 201, await made.text());

  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/templates/new`);
  await page.getByRole('heading', { name: 'New template', level: 1 }).waitFor();
  const slug = page.getByLabel('Slug', { exact: true });
  const hint = await slug.getAttribute('aria-describedby');
  await page.getByLabel('Name', { exact: true }).fill('Welcome again');
  await slug.fill('welcome');
  await page.getByLabel('Subject', { exact: true }).fill('Welcome');
  await page.getByLabel('Text', { exact: true }).fill('Hello');
  await page.getByRole('button', { name: 'Create template' }).press('Enter');
  assertTied(await refusedFieldState(page, slug, 'is already used by another template'), 'slug', hint);
  assert.equal(problems, []);
  await context.close();
});

test.run();
