// The message view's "Remote images are blocked" holds for frames too: message.html's policy
// refuses a frame's load, but Chromium opens the TCP connection for an <iframe src> before it
// refuses the frame, and the sender's server would learn that, when and from where a member read
// the message. The served copy renames framing elements, so nothing in it reaches a foreign host.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as assert from 'uvu/assert';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { sendEmail, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { skippableSuite } from './support/skippable-suite.ts';

/** The sender's server: every TCP connection it is opened, and every request it gets. */
interface Watcher { base: string; connections: number; requests: string[]; server: Server }

async function startWatcher(): Promise<Watcher> {
  const watcher: Watcher = { base: '', connections: 0, requests: [], server: createServer((request, response) => {
    watcher.requests.push(request.url ?? '/');
    response.writeHead(204).end();
  }) };
  watcher.server.on('connection', () => { watcher.connections++; });
  await new Promise<void>((resolve) => watcher.server.listen(0, '127.0.0.1', resolve));
  watcher.base = `http://127.0.0.1:${(watcher.server.address() as AddressInfo).port}`;
  return watcher;
}

interface Ctx { f: DashboardFixture; browser: TestBrowser; watcher: Watcher }

const test = skippableSuite<Ctx>('dashboard: a message\'s frames reach no foreign host, in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.watcher = await startWatcher();
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
  ctx.watcher?.server.closeAllConnections();
  await new Promise((resolve) => ctx.watcher?.server.close(resolve));
});

test('viewing a message (remote images blocked) opens no connection to a host its HTML names', async ({ f, browser, watcher }) => {
  const emailId = await sendEmail(f, {
    subject: 'Your statement',
    html: `<!doctype html><html><body><p>Statement ready</p><iframe src="${watcher.base}/opened" width="1" height="1"></iframe></body></html>`,
  });
  const { page, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/emails/${emailId}/message`);
  await page.getByText('Remote images are blocked.').waitFor();
  const part = page.frameLocator('iframe.message-frame');
  await part.getByText('Statement ready').waitFor();
  // The part is parsed whole (a frame's connection is opened as its element is parsed), and holds
  // no element that loads a document.
  await waitUntil(async () => (await part.locator('relay-inert-iframe').count()) === 1, 'the part\'s frame element is in the view, renamed');
  assert.is(await part.locator('iframe, frame, object, embed').count(), 0);
  await waitUntil(() => watcher.connections > 0, 'a connection to the sender\'s host', 3000).catch(() => undefined);
  assert.is(watcher.connections, 0,
    `with remote images blocked, the member's browser opened ${watcher.connections} TCP connection(s) to the sender's host (requests: ${JSON.stringify(watcher.requests)})`);
  await context.close();
});

test.run();
