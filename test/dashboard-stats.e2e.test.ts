// The dashboard's Stats page in real Chromium, over a generated history the live deliverability
// processor projected: the two rates on meters marked at their thresholds, with the level the API
// gives and each explained from what it counts; the chart (SVG rendered by the server) loaded as
// an image; the failing recipient domains in the API's order; the range in the address;
// accessibility and a 375-pixel screen.
import * as assert from 'uvu/assert';
import { axeViolations, chromiumMissing, launchBrowser, NARROW, overflowsSideways, screenshot, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { groupCaughtUp } from './support/consumer-groups.ts';
import { appendHistory, generateHistory } from './support/history.ts';
import { call, signIn as apiSignIn } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser; cookie: string }>('dashboard: the Stats page in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['deliverability'] });
  const { t } = ctx.f;
  const start = new Date(Date.now() - 20 * 3_600_000).toISOString();
  const appended = await appendHistory(t.stores.events, generateHistory({ emails: 300, projectId: ctx.f.projectId, workspaceId: ctx.f.workspaceId, start, spacingMs: 200_000, seed: 2601 }));
  await groupCaughtUp(t, 'deliverability', appended);
  ctx.cookie = await apiSignIn(t, ctx.f.owner.email);
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const percent = (rate: number) => `${(rate * 100).toFixed(rate < 0.01 ? 2 : 1)} %`;

test('the rates against their thresholds, the chart and the failing domains, as the API gives them', async ({ f, browser, cookie }) => {
  const { page, problems } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/stats`);
  await page.getByRole('heading', { name: 'Stats', level: 1 }).waitFor();
  await page.getByRole('navigation').getByRole('link', { name: 'Stats' }).waitFor();
  const stats = (await call(f.t, 'GET', `/v1/projects/${f.projectId}/stats`, { as: cookie })).json();
  assert.ok(stats.totals.sent > 100, 'the history is in the read model');

  const bounce = page.getByRole('meter', { name: 'Bounce rate' });
  assert.is(Number(await bounce.getAttribute('value')), stats.totals.bounce_rate);
  assert.is(Number(await bounce.getAttribute('low')), 0.05);
  assert.is(Number(await bounce.getAttribute('high')), 0.1);
  const complaint = page.getByRole('meter', { name: 'Complaint rate' });
  assert.is(Number(await complaint.getAttribute('value')), stats.totals.complaint_rate);
  assert.is(Number(await complaint.getAttribute('low')), 0.001);
  assert.is(Number(await complaint.getAttribute('high')), 0.003);
  const level = { ok: 'ok', warning: 'warning', risk: 'at risk' } as const;
  await page.locator('.rate').filter({ hasText: 'Bounce rate' }).getByText(percent(stats.totals.bounce_rate)).waitFor();
  await page.locator('.rate').filter({ hasText: 'Bounce rate' }).getByText(level[stats.thresholds.bounce_rate.level as keyof typeof level], { exact: true }).waitFor();
  await page.locator('.rate').filter({ hasText: 'Complaint rate' }).getByText(level[stats.thresholds.complaint_rate.level as keyof typeof level], { exact: true }).waitFor();
  await page.getByText('Warning from 5.0 %, risk from 10.0 %').waitFor();
  await page.getByText('Warning from 0.10 %, risk from 0.30 %').waitFor();
  // Each rate is explained from what it counts (domain/deliverability/rates.ts), not from the other's formula.
  await page.locator('.rate').filter({ hasText: 'Complaint rate' }).getByText('(complaint rate: the recipients complained among those sent, delivered or complained)').waitFor();
  await page.locator('.rate').filter({ hasText: 'Bounce rate' }).getByText('(bounce rate: the recipients hard bounced among those sent or hard bounced)').waitFor();

  const chart = page.getByRole('img', { name: /^Recipients per hour/ });
  await chart.waitFor();
  await page.waitForFunction("(() => { const i = document.querySelector('figure.chart img'); return i && i.complete && i.naturalWidth > 0; })()");

  const rows = page.getByRole('region', { name: 'Recipient domains by failures' }).locator('tbody tr');
  assert.is(await rows.count(), stats.recipient_domains.length);
  const first = stats.recipient_domains[0];
  assert.match(await rows.first().innerText(), new RegExp(`^${first.domain.replace('.', '\\.')}\\s+${first.failures}\\b`));
  assert.match(await rows.first().innerText(), new RegExp(first.top_reply.code.replace('.', '\\.')));
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'stats-desktop');

  await page.getByLabel('Range', { exact: true }).selectOption('7d');
  await page.getByRole('button', { name: 'Show' }).click();
  await page.waitForURL((url) => url.searchParams.get('range') === '7d');
  await page.getByRole('img', { name: /^Recipients per day/ }).waitFor();
  assert.equal(problems, []);
  await page.context().close();
});

test('the chart is an SVG image the server renders, refused to others', async ({ f, cookie }) => {
  const chart = await call(f.t, 'GET', `/v1/projects/${f.projectId}/stats/chart.svg`, { as: cookie });
  assert.is(chart.statusCode, 200);
  assert.match(String(chart.headers['content-type']), /^image\/svg\+xml/);
  assert.match(String(chart.headers['content-security-policy']), /default-src 'none'/);
  assert.is((chart.body.match(/<polyline /g) ?? []).length, 5);
  assert.not.match(chart.body, /<script|style=|href=/);
  assert.is((await call(f.t, 'GET', `/v1/projects/${f.projectId}/stats/chart.svg`)).statusCode, 401);
});

test('the Stats page works on a 375-pixel screen without sideways scrolling', async ({ f, browser }) => {
  const { page, problems } = await browser.open(NARROW);
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/stats`);
  await page.getByRole('heading', { name: 'Stats', level: 1 }).waitFor();
  await page.getByRole('meter', { name: 'Bounce rate' }).waitFor();
  assert.not.ok(await overflowsSideways(page));
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'stats-narrow');
  assert.equal(problems, []);
  await page.context().close();
});

test.run();
