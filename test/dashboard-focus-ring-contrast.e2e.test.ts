// The dashboard draws its own keyboard focus ring (dashboard.css, the `:focus-visible` rule: a
// 3 px outline 2 px outside the control), and that ring has a contrast ratio of at least 3:1
// against the background it is drawn on, as WCAG 2.1 1.4.11 Non-text Contrast (AA) asks of the
// visual information that identifies a component's state (focus): on the page's white, on the
// header's wash and on the tinted box a new key's secret is shown in; and in forced colors
// (Windows contrast themes), where the browser draws it in the theme's colours. Keyboard users
// with low vision find where they are by this ring alone.
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: the keyboard focus indicator is visible (WCAG 1.4.11, 3:1)', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

interface Ring { element: string; outline: string; width: number; background: string }

/** The focused element's outline, and the background it is drawn on (the first opaque one outside the element). */
const ring = (page: Page) => page.evaluate<Ring>(`(() => {
  const e = document.activeElement;
  const s = getComputedStyle(e);
  let b = e.parentElement;
  while (b && /rgba\\(.*, 0\\)$/.test(getComputedStyle(b).backgroundColor)) b = b.parentElement;
  const label = e.getAttribute('aria-label') || e.textContent.trim().slice(0, 30) || e.getAttribute('name') || '';
  return {
    element: e.tagName.toLowerCase() + ' "' + label + '"',
    outline: s.outlineStyle === 'none' ? 'none' : s.outlineColor,
    width: parseFloat(s.outlineWidth),
    background: b ? getComputedStyle(b).backgroundColor : 'rgb(255, 255, 255)',
  };
})()`);

const channels = (rgb: string) => (rgb.match(/[\d.]+/g) ?? []).map(Number);
/** An rgb() or rgba() colour as it shows over an opaque `under` (forced colors draw the ring partly transparent). */
function over(colour: string, under: string): number[] {
  const [r, g, b, alpha = 1] = channels(colour);
  const base = channels(under);
  return [r, g, b].map((c, i) => c * alpha + base[i] * (1 - alpha));
}
function luminance([r, g, b]: number[]): number {
  const [lr, lg, lb] = [r, g, b].map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * lr + 0.7152 * lg + 0.0722 * lb;
}
const contrast = (outline: string, background: string) => {
  const [hi, lo] = [luminance(over(outline, background)), luminance(channels(background))].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
};

/** Presses Tab `presses` times; the focus rings below 3:1, and how many rings were measured. */
async function tabThrough(page: Page, presses: number): Promise<{ failures: string[]; measured: number }> {
  const failures: string[] = [];
  let measured = 0;
  for (let i = 0; i < presses; i++) {
    await page.keyboard.press('Tab');
    const r = await ring(page);
    if (r.outline === 'none' || r.width === 0) continue; // shown some other way: not this check's concern
    measured++;
    const ratio = contrast(r.outline, r.background);
    if (ratio < 3) failures.push(`${r.element}: outline ${r.outline} on ${r.background} is ${ratio.toFixed(2)}:1`);
  }
  return { failures, measured };
}

test('page /sign-in: the focus ring of the email field, password field and "Sign in" reaches 3:1', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await page.goto(`${f.origin}/sign-in`);
  await page.getByRole('heading', { name: 'Sign in to Relay' }).waitFor();
  await page.locator('body').click({ position: { x: 1, y: 1 } });
  const { failures, measured } = await tabThrough(page, 3);
  assert.is(measured, 3, 'every control shows a focus ring');
  assert.equal(failures, [], 'WCAG 1.4.11: focus indicators below 3:1');
  assert.equal(problems, []);
  await context.close();
});

test('page /projects/:p/api-keys: the focus ring of the header\'s and the navigation\'s controls reaches 3:1', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/api-keys`);
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  // Skip link, brand, the switchers, sign-out, then the navigation's sections.
  const { failures, measured } = await tabThrough(page, 10);
  assert.ok(measured >= 8, `focus rings measured: ${measured}`);
  assert.equal(failures, [], 'WCAG 1.4.11: focus indicators below 3:1');
  assert.equal(problems, []);
  await context.close();
});

test('page /projects/:p/api-keys: the focus ring of the new key\'s "Copy" button, on the secret\'s tinted box, reaches 3:1', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/api-keys`);
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  await page.getByLabel('Name', { exact: true }).fill('Focus ring');
  await page.getByRole('button', { name: 'Create key' }).press('Enter');
  const copy = page.getByRole('button', { name: 'Copy the new API key' });
  await copy.waitFor();
  // From "Create key", where focus stayed, Tab goes on to the controls after the form.
  const focused = () => copy.evaluate((element) => element === element.ownerDocument.activeElement);
  for (let presses = 0; presses < 5 && !(await focused()); presses++) await page.keyboard.press('Tab');
  assert.ok(await focused(), 'Tab reaches the "Copy" button');
  const r = await ring(page);
  assert.is(r.background, 'rgb(255, 251, 234)', 'the Copy button sits on the secret\'s tint');
  assert.ok(contrast(r.outline, r.background) >= 3, `${r.element}: outline ${r.outline} on ${r.background} is ${contrast(r.outline, r.background).toFixed(2)}:1`);
  assert.equal(problems, []);
  await context.close();
});

test('forced colors, page /sign-in: the focus ring is still drawn, at 3:1 or more against the theme\'s background', async ({ f, browser }) => {
  const context = await browser.browser.newContext({ viewport: { width: 1280, height: 860 }, forcedColors: 'active' });
  const page = await context.newPage();
  await page.goto(`${f.origin}/sign-in`);
  await page.getByRole('heading', { name: 'Sign in to Relay' }).waitFor();
  assert.is(await page.evaluate("matchMedia('(forced-colors: active)').matches"), true, 'the browser does not emulate forced colors');
  await page.locator('body').click({ position: { x: 1, y: 1 } });
  const { failures, measured } = await tabThrough(page, 3);
  assert.is(measured, 3, 'every control shows a focus ring in forced colors');
  assert.equal(failures, [], 'WCAG 1.4.11: focus indicators below 3:1 in forced colors');
  await context.close();
});

test.run();
