// Templates in the dashboard, in real Chromium: create one with a live preview (handlebars in
// MJML, rendered by POST /v1/templates/preview), edit it, meet the stale-revision conflict from a
// second tab with both versions shown and reload, and send a test that shows up as an email.
import * as assert from 'uvu/assert';
import { axeViolations, chromiumMissing, launchBrowser, screenshot, type TestBrowser } from './support/browser.ts';
import { signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: templates with live preview and the stale revision in Chromium', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard({}, { processors: ['projector'] });
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

const MJML = '<mjml><mj-body><mj-section><mj-column><mj-text>Hello {{name}}, welcome aboard</mj-text></mj-column></mj-section></mj-body></mjml>';

test('create with a live preview, edit, the conflict from a second tab, reload, send a test', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.getByRole('link', { name: 'Templates' }).click();
  await page.getByText('No templates yet').waitFor();
  await page.getByRole('link', { name: 'New template' }).click();
  await page.getByRole('heading', { name: 'New template' }).waitFor();
  await page.getByLabel('Name').fill('Welcome');
  await page.getByLabel('Slug').fill('welcome');
  await page.getByLabel('Subject').fill('Welcome {{name}}');
  await page.getByLabel('HTML', { exact: true }).fill(MJML);
  await page.getByLabel('Text', { exact: true }).fill('Hello {{name}}');
  await page.getByLabel('Variables (JSON)').fill('{"name": "Ada"}');
  // The preview is MJML rendered to HTML, in a sandboxed frame, as the person types.
  await page.getByText('Subject: Welcome Ada').waitFor();
  await page.frameLocator('iframe.message-frame').getByText('Hello Ada, welcome aboard').waitFor();
  assert.is(await page.getByLabel('Preview of the text part').innerText(), 'Hello Ada');
  await page.getByRole('button', { name: 'Create template' }).click();
  await page.waitForURL((url) => /\/templates\/[^/]+$/.test(url.pathname) && !url.pathname.endsWith('/new'));
  const editorUrl = page.url();
  await page.getByText('Revision 1, saved').waitFor();
  assert.equal(await axeViolations(page), []);
  await screenshot(page, 'template-live-preview-desktop');

  await page.getByLabel('Subject').fill('Welcome, {{name}}!');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved: revision 2.').waitFor();
  const revisionHint = (tab: typeof page) => tab.getByText(/^Revision \d+, saved/).innerText();
  assert.match(await revisionHint(page), /^Revision 2, saved/);

  // A second tab opens revision 2; the first saves revision 3; the second, still on 2, saves too.
  const second = await context.newPage();
  await second.goto(editorUrl);
  await second.getByText('Revision 2, saved').waitFor();
  await page.getByLabel('Subject').fill('Welcome from tab one, {{name}}');
  await page.getByRole('button', { name: 'Save' }).click();
  await page.getByText('Saved: revision 3.').waitFor();
  await second.getByLabel('Text', { exact: true }).fill('Edited in tab two, {{name}}');
  await second.getByRole('button', { name: 'Save' }).click();
  await second.getByRole('heading', { name: 'This template changed while you were editing' }).waitFor();
  assert.match(await second.getByLabel('Your version: text').innerText(), /Edited in tab two/);
  assert.match(await second.getByLabel('Your version: subject').innerText(), /^Welcome, \{\{name\}\}!$/);
  assert.match(await second.getByLabel('Saved version (revision 3): subject').innerText(), /tab one/);
  await second.frameLocator('iframe.message-frame').getByText('Hello name, welcome aboard').waitFor();
  assert.equal(await axeViolations(second), []);
  await screenshot(second, 'template-conflict-desktop');
  await second.getByRole('button', { name: 'Reload the saved version' }).click();
  assert.is(await second.getByLabel('Subject').inputValue(), 'Welcome from tab one, {{name}}');
  await second.getByText('Reloaded revision 3.').waitFor();
  assert.match(await revisionHint(second), /^Revision 3, saved/);
  // Saving now builds on revision 3.
  await second.getByLabel('Text', { exact: true }).fill('Edited in tab two, {{name}}');
  await second.getByRole('button', { name: 'Save' }).click();
  await second.getByText('Saved: revision 4.').waitFor();
  assert.match(await revisionHint(second), /^Revision 4, saved/);
  await second.close();

  // A test send: the saved template, the variables of the preview, to the project's own domain.
  await page.reload();
  await page.getByText('Revision 4, saved').waitFor();
  await page.getByLabel('Variables (JSON)').fill('{"name": "Grace"}');
  assert.is(await page.getByLabel('From').inputValue(), `Relay test <test@${f.domain}>`);
  await page.getByLabel('To', { exact: true }).fill(`qa@${f.domain}`);
  await page.getByRole('button', { name: 'Send the test' }).click();
  await page.getByText('Test queued.').waitFor();
  await page.getByRole('link', { name: 'See the email' }).click();
  await page.getByRole('heading', { name: 'Welcome from tab one, Grace', level: 1 }).waitFor();
  assert.match(await page.locator('.table-wrap[aria-label="Recipients"]').innerText(), new RegExp(`qa@${f.domain}`));
  assert.equal(problems, []);
  await context.close();
});

test.run();
