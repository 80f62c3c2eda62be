// The Emails page's "Sent after" / "Sent before" fields show the address's `after` / `before` in
// the reader's zone, to the minute (datetime-local). "Apply filters" sends a bound the reader did
// not change on exactly as the address had it, so a linked view narrowed by another filter (a
// status, "Per page") keeps its time window:
//  - seconds and milliseconds stay: an email the link's `after` leaves out (created a moment
//    before it, in the same minute) stays out;
//  - in the repeated half hour when daylight saving time ends on Lord Howe Island, where a local
//    time names two instants, a bound in the second occurrence stays where it was.
// A field the reader edits is read as the browser's local time, and both fields' hints say so,
// naming the zone; a field the reader empties drops its bound.
// Driven through real Chromium, its time zone set by the DevTools protocol
// (Emulation.setTimezoneOverride, via Playwright's timezoneId) and its language de-DE.
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';
import { waitUntil } from './support/eventually.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser }

const test = skippableSuite<Ctx>('dashboard: a time filter of the address kept when other filters are applied', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

async function openAs(ctx: Ctx, timezoneId: string) {
  const context = await ctx.browser.browser.newContext({ timezoneId, locale: 'de-DE', viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.setDefaultTimeout(15_000);
  await signIn(page, ctx.f);
  return { context, page };
}

test('an email the link\'s "after" leaves out stays out when only "Per page" is changed', async (ctx) => {
  const { f } = ctx;
  const emailId = await sendEmail(f, { subject: 'Before the bound' });
  // The email's own instant, once the list (the "emails" read model the page reads) holds it; the bound is one millisecond after it.
  let createdAt = '';
  await waitUntil(async () => {
    const response = await fetch(`${f.t.url}/v1/emails?limit=100`, { headers: { authorization: `Bearer ${f.apiKey}` } });
    if (response.status !== 200) return false;
    const listed = ((await response.json()) as { emails: Array<{ id: string; createdAt: string }> }).emails.find((e) => e.id === emailId);
    createdAt = listed?.createdAt ?? '';
    return createdAt !== '';
  }, 'the email is listed', 10_000);
  // Just after the email, and never on a whole minute (a bound the field shows exactly would prove nothing).
  let bound = Date.parse(createdAt) + 1;
  if (bound % 60_000 === 0) bound += 1;
  const after = new Date(bound).toISOString();

  const { context, page } = await openAs(ctx, 'UTC');
  await page.goto(`${f.origin}/projects/${f.projectId}/emails?${new URLSearchParams({ after })}`);
  await page.locator('.results').getByText(/./).first().waitFor();
  assert.is(await page.getByRole('link', { name: 'Before the bound' }).count(), 0, 'the link leaves the email out');

  await page.getByLabel('Per page').selectOption('25');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => url.searchParams.get('limit') === '25');
  const applied = new URL(page.url()).searchParams.get('after');
  await page.locator('.results').getByText(/./).first().waitFor();
  const shown = await page.getByRole('link', { name: 'Before the bound' }).count();
  await context.close();
  assert.is(shown, 0, `the email created before the bound is listed once "Per page" is applied ("after" became ${applied})`);
  assert.is(applied, after, 'the untouched "Sent after" is sent on as the address had it');
});

test('on Lord Howe Island, a bound in the repeated half hour of the end of DST does not move', async (ctx) => {
  const { f } = ctx;
  // 2026-04-05: at 02:00 (+11:00) clocks go back to 01:30 (+10:30). 15:15Z is 01:45 the second time.
  const after = '2026-04-04T15:15:00.000Z';
  const { context, page } = await openAs(ctx, 'Australia/Lord_Howe');
  await page.goto(`${f.origin}/projects/${f.projectId}/emails?${new URLSearchParams({ after })}`);
  await page.locator('.results').getByText(/./).first().waitFor();
  assert.is(await page.getByLabel('Sent after').inputValue(), '2026-04-05T01:45', 'shown in the reader\'s local time');
  await page.getByLabel('Status').selectOption('sent');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => url.searchParams.get('status') === 'sent');
  const applied = new URL(page.url()).searchParams.get('after');
  await context.close();
  assert.is(applied, after, `"Sent after" moved from ${after} to ${applied} though the reader never touched it`);
});

test('an edited field is read as the browser\'s local time, which its hint names; the untouched one is kept, an emptied one dropped', async (ctx) => {
  const { f } = ctx;
  const after = '2026-06-30T22:10:20.250Z';
  const before = '2026-07-02T05:59:59.999Z';
  const { context, page } = await openAs(ctx, 'Europe/Berlin');
  await page.goto(`${f.origin}/projects/${f.projectId}/emails?${new URLSearchParams({ after, before })}`);
  await page.locator('.results').getByText(/./).first().waitFor();
  for (const label of ['Sent after', 'Sent before']) {
    const describedBy = await page.getByLabel(label).getAttribute('aria-describedby');
    assert.ok(describedBy, `"${label}" has a hint`);
    assert.is(await page.locator(`[id="${describedBy}"]`).innerText(), 'Your browser\'s local time (Europe/Berlin).', `"${label}"'s hint`);
  }
  assert.is(await page.getByLabel('Sent after').inputValue(), '2026-07-01T00:10');
  assert.is(await page.getByLabel('Sent before').inputValue(), '2026-07-02T07:59');

  // 12:00 in Berlin in July (CEST, +02:00) is 10:00 UTC.
  await page.getByLabel('Sent after').fill('2026-07-01T12:00');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => url.searchParams.get('after') !== after);
  let applied = new URL(page.url()).searchParams;
  assert.is(applied.get('after'), '2026-07-01T10:00:00.000Z', 'the edited "Sent after" is read in Berlin time');
  assert.is(applied.get('before'), before, 'the untouched "Sent before" is kept to the millisecond');

  await page.locator('.results').getByText(/./).first().waitFor();
  await page.getByLabel('Sent before').fill('');
  await page.getByRole('button', { name: 'Apply filters' }).click();
  await page.waitForURL((url) => !url.searchParams.has('before'));
  applied = new URL(page.url()).searchParams;
  await context.close();
  assert.is(applied.get('after'), '2026-07-01T10:00:00.000Z', 'the bound the reader set before is kept');
});

test.run();
