// A dashboard address that is no page (a mistyped or outdated link: /projects/:p/email,
// /settings) opened in a browser answers 404 with the dashboard's own "Page not found": an HTML
// document with a title and a language, a heading and a link back to the dashboard, with no WCAG
// 2.1 A/AA violation axe-core finds (document-title, 2.4.2 Page Titled; html-has-lang, 3.1.1
// Language of Page), rather than the API's JSON error envelope shown as raw text. Only a browser's
// navigation (Sec-Fetch-Dest: document) outside the machine interface gets it: an API client, a
// fetch from a page, and a navigation to /v1/… or to the health and metrics endpoints keep the
// `not_found` envelope (apps/api/INTERFACE-DECISIONS.md, Request targets).
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, wcagViolations, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: an address that is no page answers a page a person can use', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

for (const [name, path] of [
  ['a mistyped section', (f: DashboardFixture) => `/projects/${f.projectId}/email`],
  ['a page the dashboard does not have', () => '/settings'],
] as const) {
  test(`${name}: a 404 page with a title, a language, a heading and a link to the dashboard, no WCAG A/AA violation`, async ({ f, browser }) => {
    const { page, context } = await browser.open();
    await signIn(page, f);
    const response = await page.goto(`${f.origin}${path(f)}`);
    assert.is(response?.status(), 404, 'still a 404');
    assert.match(response!.headers()['content-type'] ?? '', /^text\/html/);
    // The dashboard's not-found page draws its heading once its script has run.
    await page.getByRole('heading', { name: 'Page not found', level: 1 }).waitFor();
    assert.is(await page.title(), 'Page not found · Relay');
    assert.is(await page.getAttribute('html', 'lang'), 'en');
    assert.equal(await wcagViolations(page), [], `axe-core WCAG 2.1 A/AA on ${path(f)}`);
    const back = page.getByRole('link', { name: /dashboard/i });
    assert.is(await back.getAttribute('href'), '/');
    // The way back leads to a page of the dashboard.
    await back.click();
    await page.waitForURL((url) => url.pathname.startsWith(`/projects/${f.projectId}/`));
    await context.close();
  });
}

test('a fetch from a page of the dashboard to an address that is no page gets the JSON envelope', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/api-keys`);
  await page.getByRole('heading', { name: 'API keys', level: 1 }).waitFor();
  const answer = await page.evaluate(`fetch('/settings').then(async (r) => ({ status: r.status, type: r.headers.get('content-type'), body: await r.json() }))`) as
    { status: number; type: string; body: unknown };
  assert.is(answer.status, 404);
  assert.match(answer.type, /^application\/json/);
  assert.equal(answer.body, { error: { code: 'not_found', message: 'no route for GET /settings' } });
  assert.equal(problems, []);
  await context.close();
});

test('over HTTP: only a navigation outside the machine interface gets the page; the rest keeps the envelope', async ({ f }) => {
  const get = (path: string, dest?: string) => fetch(`${f.origin}${path}`, { headers: dest ? { 'sec-fetch-dest': dest } : {} });
  const page = await get('/settings', 'document');
  assert.is(page.status, 404);
  assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
  assert.match(page.headers.get('vary') ?? '', /Sec-Fetch-Dest/i);
  assert.ok(page.headers.get('content-security-policy'), 'the page keeps the dashboard\'s headers');
  assert.match(await page.text(), /<html lang="en">/);
  for (const [path, dest] of [
    ['/settings', undefined],
    ['/settings', 'empty'],
    ['/settings', 'script'],
    ['/v1/settings', 'document'],
    ['/v1', 'document'],
    ['/healthz/more', 'document'],
    ['/metrics/more', 'document'],
    ['/openapi.json', 'document'],
  ] as const) {
    const response = await get(path, dest);
    assert.is(response.status, 404, `${path} (${dest ?? 'no destination'})`);
    assert.match(response.headers.get('content-type') ?? '', /^application\/json/, `${path} (${dest ?? 'no destination'})`);
    // A cache keyed on the address alone must not hand this answer to a navigation, nor the page to this.
    assert.match(response.headers.get('vary') ?? '', /Sec-Fetch-Dest/i, `${path} (${dest ?? 'no destination'})`);
    assert.equal(await response.json(), { error: { code: 'not_found', message: `no route for GET ${path}` } }, `${path} (${dest ?? 'no destination'})`);
  }
});

test.run();
