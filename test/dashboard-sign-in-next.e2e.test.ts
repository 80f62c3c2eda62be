// Where the sign-in page goes after a successful sign-in (`next` in its address): a path of the
// dashboard, never another site, however the address spells it. "/<TAB>/host" looks like a path
// to a pattern, but the URL parser drops the tab and reads "//host". In Chromium, because the
// browser's parser is the one that decides.
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: sign-in leads only to the dashboard', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

async function signInWith(f: DashboardFixture, browser: TestBrowser, next: string) {
  const { page, context } = await browser.open();
  const foreign: string[] = [];
  // Anything not on the dashboard's origin is recorded and answered locally (no real network).
  await context.route((url) => url.origin !== f.origin, (route) => {
    foreign.push(route.request().url());
    return route.fulfill({ status: 200, contentType: 'text/html', body: '<p>elsewhere</p>' });
  });
  await page.goto(`${f.origin}/sign-in?next=${encodeURIComponent(next)}`);
  await page.getByLabel('Email').fill(f.owner.email);
  await page.getByLabel('Password').fill(f.owner.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL((url) => url.pathname !== '/sign-in');
  return { page, context, foreign };
}

test('next, a path of the dashboard, is where the sign-in leads', async ({ f, browser }) => {
  const { page, context, foreign } = await signInWith(f, browser, '/emails?status=sent');
  assert.equal(foreign, []);
  const url = new URL(page.url());
  assert.equal([url.origin, url.pathname, url.search], [f.origin, '/emails', '?status=sent']);
  await context.close();
});

// A dot segment resolves to a path that reads as another host ("/.//evil" is the path "//evil").
for (const next of ['/\t/evil.example.test/phish', '//evil.example.test/phish', 'https://evil.example.test/phish', '/\\evil.example.test/phish', 'javascript:alert(1)', '/.//evil.example.test/phish', '/%2e%2e//evil.example.test/phish']) {
  test(`next=${JSON.stringify(next)} does not leave the dashboard`, async ({ f, browser }) => {
    const { page, context, foreign } = await signInWith(f, browser, next);
    assert.equal(foreign, [], `the browser was sent off the dashboard to ${foreign.join(', ')}`);
    assert.is(new URL(page.url()).origin, f.origin);
    await context.close();
  });
}

test.run();
