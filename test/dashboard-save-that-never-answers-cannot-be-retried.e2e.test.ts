// A request the network never answers (a proxy or a Wi-Fi change that leaves the connection open
// and silent) is given up at a deadline (apps/dashboard/client/api.ts request), so that the form
// that sent it is let go with what the reader typed: form() (dom.ts) ignores submissions while one
// runs, and without a deadline the template editor's "Save" would stay busy and silent for good,
// reloading (which throws away the template being edited) the only way out. Relay itself gives
// up on a silent connection after 30 s (apps/api/connection-limits.ts idleTimeoutMs).
// Why it matters: docs/dashboard.md "Actions": the control "is let go however it ends" and "a
// failure is shown inside the form"; a request that never ends is neither, and the reader can
// neither retry nor keep their work.
// Correct: a write that has not been answered within a bound (no later than Relay's own 30 s) is
// given up: the form is let go and says the request did not complete (it may or may not have been
// done), keeping what was typed, so that Save can be pressed again.
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { call } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: a save the network never answers', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

/** Relay's own bound on a silent connection, and a margin for a loaded machine. */
const GIVEN_UP_WITHIN_MS = 30_000 + 15_000;
const EDITED = '<p>Dear {{name}}, the long letter I have been writing for twenty minutes.</p>';

test('"Save" whose request is never answered: the form is let go with a message within Relay\'s 30 s, what was typed kept', async ({ f, browser }) => {
  const created = await call(f.t, 'POST', `/v1/templates?projectId=${f.projectId}`, {
    as: await ownerCookie(f), body: { name: 'Letter', slug: 'letter', subject: 'Hello {{name}}', html: '<p>Hello</p>', text: null },
  });
  assert.is(created.statusCode, 201, created.body);
  const templateId = (created.json() as { id: string }).id;

  const { page, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/templates/${templateId}`);
  await page.getByRole('heading', { name: 'Letter', level: 1 }).waitFor();
  await page.getByLabel('HTML', { exact: true }).fill(EDITED);

  // The network stops answering the save: the request leaves the page and nothing comes back.
  let sent = 0;
  await page.route(`**/v1/templates/${templateId}?*`, (route) => {
    if (route.request().method() !== 'PATCH') return route.continue();
    sent++;
    // Never continued nor fulfilled: as a connection that went silent.
  });
  const editor = page.getByRole('form', { name: 'Template' });
  await page.getByRole('button', { name: 'Save' }).click();
  await waitUntil(() => sent === 1, 'the save left the page');
  assert.is(await editor.getAttribute('aria-busy'), 'true');

  const letGo = await editor.getByRole('alert').waitFor({ timeout: GIVEN_UP_WITHIN_MS }).then(() => true, () => false);
  assert.ok(letGo, `${GIVEN_UP_WITHIN_MS / 1000} s after "Save" the form still waits (aria-busy=${await editor.getAttribute('aria-busy')}), says nothing and, while it waits, ignores another press (dom.ts form()): only a reload, which loses the edit, gets out`);
  assert.is(await editor.getAttribute('aria-busy'), null);
  assert.is(await page.getByLabel('HTML', { exact: true }).inputValue(), EDITED);
  await context.close();
});

test.run();
