// The dashboard's emails in real Chromium: the detail with its timeline as delivery goes on,
// filters and cursor paging in the address (a filter Relay refuses shown beside the form), and
// the message view: a <script> in the email's HTML does not run and a remote image is not
// fetched until the reader asks (a local HTTP server counts the requests), the text part, the
// raw source from the outbox, and "content expired" after retention.
import * as assert from 'uvu/assert';
import type { InboundServer } from '../apps/inbound/inbound-server.ts';
import { BODY_RETENTION_MS } from '../apps/services/content-vault.ts';
import { verpAddress, VERP_MAC_PURPOSE } from '../domain/delivery/verp.ts';
import { startTestApp, type TestApp } from './support/app.ts';
import { startTestInbound } from './support/inbound.ts';
import { axeViolations, chromiumMissing, launchBrowser, screenshot, type TestBrowser, type WatchedPage } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { deliverReport, dsn } from './support/reports.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { startTracker, type Tracker } from './support/tracker.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser; tracker: Tracker; emailId: string; owner: WatchedPage }

const test = skippableSuite<Ctx>('dashboard: emails, timeline and the safe message view in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.tracker = await startTracker();
  ctx.f = await startDashboard({}, { processors: true });
  ctx.browser = await launchBrowser();
  const t = ctx.tracker.base;
  ctx.emailId = await sendEmail(ctx.f, {
    subject: 'Spring sale',
    html: `<meta http-equiv="refresh" content="0;url=${t}/refreshed">`
      + '<p id="greeting">Hello from the shop</p>'
      + `<img src="${t}/pixel.png" alt="tracking pixel">`
      + `<script>new Image().src = '${t}/script-ran.png'; document.getElementById('greeting').textContent = 'script ran';</script>`
      + `<img src="data:," alt="" onerror="new Image().src = '${t}/handler-ran.png'">`,
    text: 'Hello from the shop (text part)',
    tags: { campaign: 'spring' },
    metadata: { order: { id: 1001 } },
    headers: { 'X-Campaign': 'spring-2026' },
  });
  ctx.owner = await ctx.browser.open();
  await signIn(ctx.owner.page, ctx.f);
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.tracker?.close();
});

test('the detail shows the timeline as delivery goes on, recipients, tags and metadata', async ({ f, owner: { page, problems }, emailId }) => {
  await page.getByRole('link', { name: 'Spring sale' }).click();
  await page.waitForURL(`${f.origin}/projects/${f.projectId}/emails/${emailId}`);
  await page.getByRole('heading', { name: 'Spring sale', level: 1 }).waitFor();
  // The outbox transport writes the message: the page follows the email to its outcome without a reload.
  const timeline = page.locator('.timeline');
  await timeline.getByText('email.queued').waitFor();
  await timeline.getByText('email.sent').waitFor();
  const recipients = page.locator('.table-wrap[aria-label="Recipients"]');
  assert.match(await recipients.innerText(), /buyer@dash\.example\.test\s+sent/);
  assert.match(await page.locator('section', { has: page.getByRole('heading', { name: 'Tags' }) }).innerText(), /campaign\s+spring/);
  assert.match(await page.locator('pre[aria-label="Metadata as JSON"]').innerText(), /"id": 1001/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'email-timeline-desktop');
  assert.equal(problems, []);
});

test('the message view: the script does not run, the remote image waits until asked, the meta refresh goes nowhere', async ({ f, owner: { page, problems }, tracker, emailId }) => {
  const blocked: string[] = [];
  page.on('console', (message) => blocked.push(message.text()));
  await page.getByRole('link', { name: 'View the message' }).click();
  await page.waitForURL(`${f.origin}/projects/${f.projectId}/emails/${emailId}/message`);
  const frameElement = page.locator('iframe.message-frame');
  assert.is(await frameElement.getAttribute('sandbox'), 'allow-popups allow-popups-to-escape-sandbox');
  const frame = page.frameLocator('iframe.message-frame');
  // The positive marker first: the HTML part is in the frame, parsed, its text as written.
  await frame.getByText('Hello from the shop').waitFor();
  await waitUntil(() => blocked.some((text) => /Blocked script execution/.test(text)), 'Chromium reports the script blocked by the sandbox');
  assert.is(tracker.count('/pixel.png'), 0, 'remote image fetched before it was asked for');
  assert.is(tracker.count('/script-ran.png') + tracker.count('/handler-ran.png'), 0, 'a script of the message ran');
  await page.getByText('Remote images are blocked.').waitFor();
  assert.match(await page.locator('pre[aria-label="Text part"]').innerText(), /text part/);
  assert.match(await page.getByRole('region', { name: 'Headers' }).locator('dl').innerText(), /X-Campaign\s+spring-2026/);
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'message-safe-preview-desktop');

  await page.getByRole('button', { name: 'Load remote images' }).click();
  await waitUntil(() => tracker.count('/pixel.png') === 1, 'the remote image is fetched once the reader asks');
  await frame.getByText('Hello from the shop').waitFor();
  // Images from anywhere are allowed now, so only the sandbox keeps the script's beacon from going out.
  assert.is(tracker.count('/script-ran.png') + tracker.count('/handler-ran.png'), 0);
  assert.is(tracker.count('/refreshed'), 0);
  await page.getByText('Remote images are shown').waitFor();

  await page.getByText('Show the raw source').click();
  const raw = await page.locator('pre[aria-label="Raw source"]').innerText();
  assert.match(raw, /DKIM-Signature:/);
  assert.match(raw, /Subject: Spring sale/);
  assert.equal(problems, []);
});

test('filters and cursor paging live in the address', async ({ f, owner: { page, problems } }) => {
  for (const n of [1, 2, 3]) await sendEmail(f, { subject: `Receipt ${n}`, to: [`r${n}@${f.domain}`] });
  await page.goto(`${f.origin}/projects/${f.projectId}/emails`);
  await page.getByRole('link', { name: 'Receipt 3' }).waitFor();
  await page.getByLabel('Recipient').fill(`r2@${f.domain}`);
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => url.searchParams.get('recipient') === `r2@${f.domain}`);
  await page.getByRole('link', { name: 'Receipt 2' }).waitFor();
  assert.is(await page.getByRole('link', { name: /^Receipt/ }).count(), 1);

  await page.goto(`${f.origin}/projects/${f.projectId}/emails?limit=2`);
  await page.getByRole('link', { name: 'Receipt 3' }).waitFor();
  assert.is(await page.locator('tbody tr').count(), 2);
  await page.getByRole('link', { name: 'Next page' }).click();
  await page.waitForURL((url) => url.searchParams.has('cursor') && url.searchParams.get('limit') === '2');
  await page.getByRole('link', { name: 'Receipt 1' }).waitFor();
  await page.getByRole('link', { name: 'Spring sale' }).waitFor();
  assert.is(await page.getByRole('link', { name: 'Next page' }).count(), 0);
  await page.getByRole('link', { name: 'Newest' }).click();
  await page.getByRole('link', { name: 'Receipt 3' }).waitFor();
  assert.equal(problems, []);
});

test('a filter Relay refuses leaves the page and its filters, with the refusal beside the form, until corrected', async ({ f, owner: { page, problems } }) => {
  const recipient = `buyer@${f.domain}`;
  await page.goto(`${f.origin}/projects/${f.projectId}/emails?${new URLSearchParams({ recipient, after: 'yesterday' })}`);
  const form = page.getByRole('form', { name: 'Filter emails' });
  const refusal = form.getByRole('alert');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /after: must be an RFC 3339 date-time/);
  assert.is(await page.getByRole('heading', { name: 'Emails', level: 1 }).count(), 1);
  assert.is(await page.getByLabel('Recipient').inputValue(), recipient);
  assert.is(await page.locator('.results').innerText(), '');

  // A status Relay does not know stays chosen in the form, so the reader sees what to change.
  await page.goto(`${f.origin}/projects/${f.projectId}/emails?${new URLSearchParams({ recipient, status: 'lost' })}`);
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /status: must be one of/);
  assert.is(await page.getByLabel('Status').inputValue(), 'lost');
  await page.getByLabel('Status').selectOption('sent');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => url.searchParams.get('status') === 'sent' && url.searchParams.get('recipient') === recipient);
  await page.getByRole('link', { name: 'Spring sale' }).waitFor();
  assert.is(await form.getByRole('alert').count(), 0);
  assert.equal(problems, []);
});

test('after seven days the message view says the content expired', async ({ f, owner: { page, problems }, emailId }) => {
  f.t.clock.advance(BODY_RETENTION_MS + 60_000);
  try {
    await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}/message`);
    await page.getByRole('heading', { name: 'Content expired' }).waitFor();
    await page.getByText('Relay keeps message bodies for seven days').waitFor();
    assert.is(await page.locator('iframe').count(), 0);
  } finally {
    f.t.clock.advance(-(BODY_RETENTION_MS + 60_000));
  }
  assert.equal(problems, []);
});

test.run();

// An email's page follows the email for as long as it is open: no status is the last word (a
// bounce report or a complaint may come long after "sent"). Emails wait in the queue here until
// the test starts a sender (a second process on the same data, as a deployment would), and the
// page's timers run only when the test moves the page's clock: each poll is one the test let
// happen. A bounce report then arrives at the feedback server, and the open page shows it.
interface FollowCtx { f: DashboardFixture; browser: TestBrowser; sender?: TestApp; inbound?: InboundServer }

const following = skippableSuite<FollowCtx>('dashboard: an email\'s page follows it after "sent", in Chromium', chromiumMissing);

following.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
  const t = ctx.f.t;
  ctx.inbound = await startTestInbound(t);
});
following.after(async (ctx) => {
  await ctx.inbound?.stop();
  await ctx.browser?.close();
  await ctx.sender?.close();
  await ctx.f?.close();
});

following('the page polls while the email is queued, less often once nothing changes, and shows a bounce reported after "sent"', async (ctx) => {
  const { f, browser } = ctx;
  const recipient = `buyer@${f.domain}`;
  const emailId = await sendEmail(f, { subject: 'Held in the queue', to: [recipient] });
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.clock.install();
  const detail = `/v1/projects/${f.projectId}/emails/${emailId}`;
  let polls = 0;
  page.on('request', (request) => {
    if (request.method() === 'GET' && new URL(request.url()).pathname === detail) polls++;
  });
  /** Moves the page's clock a second at a time until `condition` holds. */
  const advanceUntil = (condition: () => boolean | Promise<boolean>, what: string) =>
    waitUntil(async () => (await condition()) || (await page.clock.runFor(1000), false), what, 30_000);

  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}`);
  await page.getByRole('heading', { name: 'Held in the queue', level: 1 }).waitFor();
  const status = page.locator('main dl.facts').first().locator('dd .badge').first();
  assert.is(await status.innerText(), 'queued');
  for (let round = 1; round <= 3; round++) {
    const before = polls;
    await advanceUntil(() => polls > before, `poll ${round} of the queued email`);
  }
  assert.is(await status.innerText(), 'queued');

  ctx.sender = await startTestApp({}, { dataDir: f.t.config.dataDir, clock: f.t.clock, processors: ['sender'] });
  await advanceUntil(async () => (await status.innerText()) === 'sent', 'the page shows the email sent');
  // Nothing changes now: the wait between reads grows to 30 s and stays there, the page still
  // reading (seconds of the page's clock between one read and the next).
  const gaps: number[] = [];
  for (let round = 1; round <= 10; round++) {
    const before = polls;
    let seconds = 0;
    await advanceUntil(() => polls > before || (seconds++, false), `read ${round} after "sent"`);
    gaps.push(seconds);
  }
  assert.ok(gaps[9] >= 25 && gaps[8] >= 25 && Math.max(...gaps) <= 32 && gaps[0] < 10, `seconds between reads: ${gaps.join(', ')}`);

  const returnPath = verpAddress({ emailId, recipientIndex: 0, mailFromDomain: `bounce.${f.domain}` }, (d) => f.t.ctx.services.secrets.mac(VERP_MAC_PURPOSE, d));
  await deliverReport(ctx.inbound!.port, returnPath, dsn({ recipient, action: 'failed', status: '5.1.1', diagnostic: `550 5.1.1 <${recipient}>: Recipient address rejected: User unknown` }));
  await advanceUntil(async () => (await status.innerText()) === 'hard_bounced', 'the open page shows the bounce reported after "sent"');
  assert.equal(problems, []);
  await context.close();
});

following.run();
