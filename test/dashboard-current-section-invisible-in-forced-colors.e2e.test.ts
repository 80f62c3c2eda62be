// In forced colors (Windows contrast themes, `forced-colors: active`) the navigation still shows
// which section the reader is in. Forced colors replace every author colour and fill by the
// theme's system colours (CSS Color Adjustment 3), so a current link marked by its fill alone
// would look like every other link (WCAG 2.1 SC 1.4.1 Use of Color); it differs from them in
// something forced colors keep (dashboard.css: a border in CanvasText).
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser }

const test = skippableSuite<Ctx>('dashboard: the current section in forced colors', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

interface Looks { color: string; fill: string; fontWeight: string; underline: string; borders: string; outline: string }

/**
 * What a sighted reader can tell links apart by, as forced colors leave it. A string, not a
 * function: it runs in the page, whose globals the test's types do not know.
 */
const looks = async (page: Page, name: string) => await page.evaluate(`((element) => {
  const style = getComputedStyle(element);
  // A fill shows only if it differs from the page's own background (Canvas in forced colors),
  // which keeps a background's alpha: a transparent one is Canvas with alpha 0.
  const canvas = getComputedStyle(document.documentElement).backgroundColor;
  const transparent = /^rgba\\(.*,\\s*0\\)$/.test(style.backgroundColor);
  const edge = (side) => style['border' + side + 'Style'] === 'none' || parseFloat(style['border' + side + 'Width']) === 0
    ? 'none' : style['border' + side + 'Width'] + ' ' + style['border' + side + 'Style'] + ' ' + style['border' + side + 'Color'];
  return {
    color: style.color,
    fill: transparent || style.backgroundColor === canvas ? 'none' : style.backgroundColor,
    fontWeight: style.fontWeight,
    underline: style.textDecorationLine,
    borders: ['Top', 'Bottom', 'Left', 'Right'].map(edge).join(' / '),
    outline: style.outlineStyle === 'none' ? 'none' : style.outlineWidth + ' ' + style.outlineStyle,
  };
})([...document.querySelectorAll('nav[aria-label="Sections"] a')].find((a) => a.textContent === ${JSON.stringify(name)}))`) as Looks;

test('with forced colors active, the link of the section shown looks different from the other sections', async ({ f, browser }) => {
  const context = await browser.browser.newContext({ viewport: { width: 1280, height: 860 }, forcedColors: 'active' });
  const page = await context.newPage();
  await signIn(page, f);
  for (const [path, current, other] of [
    [`/projects/${f.projectId}/emails`, 'Emails', 'Stats'],
    [`/workspaces/${f.workspaceId}/domains`, 'Domains', 'Members'],
  ] as const) {
    await page.goto(`${f.origin}${path}`);
    const nav = page.getByRole('navigation', { name: 'Sections' });
    const here = nav.getByRole('link', { name: current, exact: true });
    await here.and(page.locator('[aria-current="page"]')).waitFor();
    assert.is(await page.evaluate("matchMedia('(forced-colors: active)').matches"), true, 'the browser does not emulate forced colors');
    const shown = await looks(page, current);
    const elsewhere = await looks(page, other);
    assert.ok(shown && elsewhere, 'the navigation links were not found');
    assert.not.equal(shown, elsewhere,
      `${path}: in forced colors the current section "${current}" looks exactly like "${other}" (${JSON.stringify(shown)})`);
  }
  await context.close();
});

test.run();
