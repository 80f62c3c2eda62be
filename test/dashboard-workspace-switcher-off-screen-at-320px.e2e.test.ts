// The header's workspace switcher (the label "Workspace", its select and the "Switch" button; on
// every signed-in page) reflows at 320 CSS px, with a workspace name of two dozen characters or
// more (names may have up to 100): the page (document.scrollingElement) is no wider than the
// viewport and the Switch button lies wholly inside it (WCAG 2.1 SC 1.4.10 Reflow: a 1280 px
// window at 400 % zoom; only tables and code may scroll, inside their own box). The switch wraps
// under its label and the select shrinks (dashboard.css `.switch`).
import * as assert from 'uvu/assert';
import { createWorkspace } from '../apps/services/management/workspaces.ts';
import { findUserByEmail } from '../apps/services/management/users.ts';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

interface Ctx { f: DashboardFixture; browser: TestBrowser }

const test = skippableSuite<Ctx>('dashboard: the workspace switcher at 320 px', chromiumMissing);

const REFLOW = { width: 320, height: 640 };

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

async function joinWorkspace(f: DashboardFixture, name: string): Promise<void> {
  const owner = await findUserByEmail(f.t.ctx.documents, f.owner.email);
  await createWorkspace(f.t.ctx.documents, owner!, name, f.t.ctx.now());
}

interface Layout { page: number; viewport: number; button: { left: number; right: number } }

async function layoutOf(page: Page): Promise<Layout> {
  return await page.evaluate(`(() => {
    const button = document.querySelector('[aria-label="Switch workspace"]').getBoundingClientRect();
    return { page: document.scrollingElement.scrollWidth, viewport: window.innerWidth, button: { left: Math.round(button.left), right: Math.round(button.right) } };
  })()`) as Layout;
}

test('a workspace with an ordinary longer name: no page scrolls sideways at 320 px and "Switch" stays on screen', async ({ f, browser }) => {
  // 27 characters: the name of a company and its region, as many workspaces are named.
  await joinWorkspace(f, 'Northwind Traders (Europe)');
  const { page, context } = await browser.open(REFLOW);
  await signIn(page, f);
  for (const path of [`/projects/${f.projectId}/emails`, `/workspaces/${f.workspaceId}/domains`]) {
    await page.goto(`${f.origin}${path}`);
    await page.getByRole('heading', { level: 1 }).filter({ hasText: /\S/ }).waitFor();
    await page.getByRole('button', { name: 'Switch workspace' }).waitFor();
    const layout = await layoutOf(page);
    assert.ok(layout.page <= layout.viewport,
      `${path}: the page is ${layout.page} CSS px wide in a ${layout.viewport} px viewport (it scrolls sideways)`);
    assert.ok(layout.button.left >= 0 && layout.button.right <= layout.viewport,
      `${path}: the "Switch" button spans ${layout.button.left}..${layout.button.right}, outside the ${layout.viewport} px viewport`);
  }
  await context.close();
});

test.run();
