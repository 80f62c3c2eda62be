// A link in an email's HTML as the dashboard frames it (a message's HTML part, a template's live
// preview), clicked in real Chromium: the linked page opens in a new tab (a local site the test
// starts sees the request, without a Referer) with no opener, even for rel=opener, and the
// dashboard page stays where it was; a javascript: link runs nothing.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import type { BrowserContext, FrameLocator, Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

/**
 * A site the emails link to: each request it gets (path, Referer), and a page that a script of
 * its own titles after its path, so the title says the page works as it would anywhere (no
 * sandbox carried over from the frame).
 */
interface Site { base: string; requests: Array<{ path: string; referer: string | undefined }>; close(): Promise<void> }

async function startSite(): Promise<Site> {
  const requests: Site['requests'] = [];
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    requests.push({ path, referer: request.headers.referer });
    if (path === '/favicon.ico') response.writeHead(404).end();
    else response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(`<!doctype html><title>Untitled</title><script>document.title = 'Site ' + location.pathname;</script><p>Welcome</p>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

interface Ctx { f: DashboardFixture; browser: TestBrowser; site: Site }

const test = skippableSuite<Ctx>('dashboard: links in an email\'s HTML open in a new tab', chromiumMissing);

test.before(async (ctx) => {
  ctx.site = await startSite();
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  await ctx.site?.close();
});

/** Clicks the link in the frame and answers the tab it opened, once the linked page is loaded in it. */
async function clickIntoNewTab(context: BrowserContext, frame: FrameLocator, name: string): Promise<Page> {
  const [tab] = await Promise.all([
    context.waitForEvent('page', { timeout: 15_000 }).catch(() => {
      throw new Error(`clicking "${name}" in the frame opened no new tab`);
    }),
    frame.getByRole('link', { name }).click(),
  ]);
  await tab.waitForLoadState('load');
  return tab;
}

async function assertOpenedAlone(tab: Page, site: Site, path: string): Promise<void> {
  assert.is(tab.url(), `${site.base}${path}`);
  assert.is(await tab.title(), `Site ${path}`, 'the linked page\'s own script did not run');
  assert.equal(site.requests.filter((r) => r.path === path), [{ path, referer: undefined }], 'the linked page is asked for once, without a Referer');
  assert.is(await tab.evaluate('window.opener'), null, 'the linked page has an opener');
}

test('the message page: a link opens in a new tab with no referrer and no opener; a javascript: link runs nothing', async ({ f, browser, site }) => {
  const emailId = await sendEmail(f, {
    subject: 'Your parcel',
    html: '<!doctype html><html lang="en"><head><title>Your parcel</title></head><body><p>Your order has shipped.</p>'
      + `<p><a href="${site.base}/parcel">Track the parcel</a></p>`
      + `<p><a href="${site.base}/reorder" rel="opener">Order again</a></p>`
      + `<p><a href="javascript:location.href='${site.base}/javascript-ran'">Unsubscribe</a></p></body></html>`,
  });
  const { page, context, problems } = await browser.open();
  await signIn(page, f);
  const messagePage = `${f.origin}/projects/${f.projectId}/emails/${emailId}/message`;
  await page.goto(messagePage);
  const frame = page.frameLocator('iframe.message-frame');
  await frame.getByText('Your order has shipped.').waitFor();
  // What makes links open in new tabs comes after the part's doctype, which still rules its rendering.
  const part = page.frames().find((candidate) => candidate.url().includes('/message.html'))!;
  assert.is(await part.evaluate('document.compatMode'), 'CSS1Compat');
  assert.is(await part.evaluate('document.documentElement.lang'), 'en');

  const tab = await clickIntoNewTab(context, frame, 'Track the parcel');
  await assertOpenedAlone(tab, site, '/parcel');
  // The sender asked for an opener: the tab still gets none.
  const reorder = await clickIntoNewTab(context, frame, 'Order again');
  await assertOpenedAlone(reorder, site, '/reorder');
  assert.is(page.url(), messagePage);
  await frame.getByText('Your order has shipped.').waitFor();

  const refusals: string[] = [];
  page.on('console', (message) => refusals.push(message.text()));
  const tabs = context.pages().length;
  await frame.getByRole('link', { name: 'Unsubscribe' }).click();
  await waitUntil(() => refusals.some((text) => /Running the JavaScript URL violates/.test(text)), 'Chromium reports the javascript: link refused');
  assert.is(site.requests.filter((r) => r.path === '/javascript-ran').length, 0, 'the javascript: link ran');
  assert.is(context.pages().length, tabs, 'the javascript: link opened a tab');
  assert.is(page.url(), messagePage);
  await frame.getByText('Your order has shipped.').waitFor();
  const sandbox = (await page.locator('iframe.message-frame').getAttribute('sandbox')) ?? '';
  assert.equal(sandbox.split(/\s+/).sort(), ['allow-popups', 'allow-popups-to-escape-sandbox'], 'the frame may open tabs and nothing else');
  assert.equal(problems, []);
  await context.close();
});

test('a template\'s live preview: a link opens in a new tab with no referrer and no opener', async ({ f, browser, site }) => {
  const { page, context, problems } = await browser.open();
  await signIn(page, f);
  const editor = `${f.origin}/projects/${f.projectId}/templates/new`;
  await page.goto(editor);
  await page.getByLabel('Subject').fill('Welcome');
  await page.getByLabel('HTML', { exact: true }).fill(`<!doctype html><p>Welcome aboard</p><p><a href="${site.base}/guide" rel="opener">Read the guide</a></p>`);
  const frame = page.frameLocator('iframe.message-frame');
  await frame.getByText('Welcome aboard').waitFor();
  // A srcdoc document is never in quirks mode, so what goes before its doctype changes nothing.
  const preview = page.frames().find((candidate) => candidate.url() === 'about:srcdoc')!;
  assert.is(await preview.evaluate('document.compatMode'), 'CSS1Compat');

  const tab = await clickIntoNewTab(context, frame, 'Read the guide');
  await assertOpenedAlone(tab, site, '/guide');
  assert.is(page.url(), editor);
  await frame.getByText('Welcome aboard').waitFor();
  assert.equal(problems, []);
  await context.close();
});

test.run();
