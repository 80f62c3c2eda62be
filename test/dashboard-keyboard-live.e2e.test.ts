// Pages that follow what happens, in real Chromium: an email's page when the email moves on (here:
// sent), a webhook endpoint's deliveries when a new one comes. Each is drawn again with keyboard
// focus where the reader had it, and a short status line says what changed; neither is a live
// region read out whole at each change.
import * as assert from 'uvu/assert';
import { startTestApp, type TestApp } from './support/app.ts';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { makeTestCa, startHttpsReceiver, trustTestCa, type HttpsReceiver, type TestCa } from './support/https-receiver.ts';
import { call } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; sender?: TestApp }
const test = skippableSuite<Ctx>('dashboard: an email page that follows the email, with the keyboard', chromiumMissing);

test.before(async (ctx) => {
  // The email waits in the queue until the test starts a sender on the same data.
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.sender?.close();
  await ctx.f?.close();
});

test('the email is sent while focus is on "View the message": focus stays there, and a short status says what changed', async (ctx) => {
  const { f, browser } = ctx;
  const emailId = await sendEmail(f, { subject: 'Held for a moment' });
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}`);
  await page.getByRole('heading', { name: 'Held for a moment', level: 1 }).waitFor();
  await page.getByRole('link', { name: 'View the message' }).focus();
  ctx.sender = await startTestApp({}, { dataDir: f.t.config.dataDir, clock: f.t.clock, processors: ['sender'] });
  await page.locator('.timeline').getByText('email.sent').waitFor();
  assert.is(await page.evaluate("(() => { const e = document.activeElement; return `${e.tagName} ${e.textContent}`; })()"), 'A View the message',
    'the redraw took keyboard focus away from the link');
  assert.is(await page.locator('main [aria-live]').count(), 0, 'a part of the page is a live region, read out again at each redraw');
  // The drawing with email.sent: at least that event is new.
  assert.match(await page.locator('main [role=status]').textContent() ?? '', /^(Status: sent; )?\d+ new events?\.$/);
  assert.equal(problems, []);
  await context.close();
});

test.run();

interface HookCtx { f: DashboardFixture; browser: TestBrowser; ca: TestCa; receiver: HttpsReceiver; endpointId: string }
const hooks = skippableSuite<HookCtx>('dashboard: a webhook endpoint\'s deliveries followed, with the keyboard', chromiumMissing);

hooks.before(async (ctx) => {
  ctx.ca = makeTestCa();
  trustTestCa(ctx.ca);
  ctx.receiver = await startHttpsReceiver(ctx.ca.issue(['localhost']));
  ctx.f = await startDashboard({ RELAY_WEBHOOK_ALLOW: `localhost:${ctx.receiver.port}` }, { processors: true });
  ctx.browser = await launchBrowser();
  const made = await call(ctx.f.t, 'POST', `/v1/projects/${ctx.f.projectId}/webhook-endpoints`, {
    as: await ownerCookie(ctx.f), body: { url: `https://localhost:${ctx.receiver.port}/hooks`, events: ['email.sent'] },
  });
  if (made.statusCode !== 201) throw new Error(`endpoint: ${made.statusCode} ${made.body}`);
  ctx.endpointId = made.json().id;
});
hooks.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.receiver?.close();
  ctx.ca?.remove();
});

hooks('a new delivery while focus is on an older one\'s email link: focus stays on that link, and a short status says one is new', async ({ f, browser, endpointId }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  const first = await sendEmail(f, { subject: 'First' });
  await page.goto(`${f.origin}/projects/${f.projectId}/webhooks/${endpointId}`);
  await page.locator('tr', { hasText: first }).getByText('succeeded').waitFor();
  await page.getByRole('link', { name: first }).focus();

  const second = await sendEmail(f, { subject: 'Second' });
  await page.getByRole('link', { name: second }).waitFor();
  assert.is(await page.evaluate("(() => { const e = document.activeElement; return `${e.tagName} ${e.textContent}`; })()"), `A ${first}`,
    'the redraw took keyboard focus away from the link');
  assert.is(await page.locator('main [aria-live]').count(), 0, 'the deliveries are a live region, read out again at each redraw');
  assert.match(await page.locator('main [role=status]').textContent() ?? '', /^Deliveries: 1 new\.$/);
  assert.equal(problems, []);
  await context.close();
});

hooks.run();
