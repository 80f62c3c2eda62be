// Keyboard focus through forms and actions, in real Chromium, which moves focus to <body> when the
// focused button is disabled or drawn away: a form's button stays focusable while its request runs
// (and a second Enter sends nothing more), a refused field is marked invalid, described by the
// refusal and focused, and an action that draws its own button again leaves focus on the notice
// that says what happened, or on the control that replaced the button.
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { ownerCookie, signIn, startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { waitUntil } from './support/eventually.ts';
import { call } from './support/management.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: keyboard focus through forms and actions', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

/** "BODY", or the focused element's tag and label (else its name, else its text). */
const focused = (page: Page) => page.evaluate<string>(
  "(() => { const e = document.activeElement; return !e || e === document.body ? 'BODY' : `${e.tagName} ${e.getAttribute('aria-label') ?? e.getAttribute('name') ?? e.textContent.trim().slice(0, 60)}`; })()");

test('a refused sign-in, submitted with Enter on its button, leaves focus in the form', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await page.goto(`${f.origin}/sign-in`);
  await page.getByLabel('Email').fill(f.owner.email);
  await page.getByLabel('Password').fill('not the password at all');
  await page.getByRole('button', { name: 'Sign in' }).press('Enter');
  await page.getByRole('alert').getByText('That email and password do not match an account.').waitFor();
  assert.is(await focused(page), 'BUTTON Sign in');
  assert.is(await page.getByRole('button', { name: 'Sign in' }).getAttribute('aria-disabled'), null, 'the button is let go');
  assert.equal(problems, []);
  await context.close();
});

test('a field Relay refuses is marked invalid, described by the refusal and focused; typing again unmarks it', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/domains`);
  const name = page.getByLabel('Domain name');
  await name.fill('not a domain');
  await page.getByRole('button', { name: 'Add domain' }).press('Enter');
  const refusal = page.getByRole('alert');
  await refusal.waitFor();
  assert.match(await refusal.innerText(), /^body\.name/);
  // What a screen reader is told of the field: whether it is invalid, and what describes it.
  const marks = () => name.evaluate((input) => ({
    invalid: input.getAttribute('aria-invalid'),
    description: (input.getAttribute('aria-describedby') ?? '').split(/\s+/).filter(Boolean)
      .map((id: string) => input.ownerDocument.getElementById(id)?.textContent ?? '').join(' | '),
  }));
  const marked = await marks();
  assert.is(marked.invalid, 'true');
  assert.match(marked.description, /letters, digits and inner hyphens/);
  assert.is(await focused(page), 'INPUT name');

  await name.pressSequentially('x');
  assert.equal(await marks(), { invalid: null, description: '' });
  assert.is(await refusal.count(), 1, 'the refusal stays shown until the next submission');
  assert.equal(problems, []);
  await context.close();
});

test('Enter pressed twice on a form\'s button while its request runs creates one key', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/api-keys`);
  let posts = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(`**/v1/projects/${f.projectId}/api-keys`, async (route) => {
    if (route.request().method() === 'POST') {
      posts++;
      await released;
    }
    await route.continue();
  });
  await page.getByLabel('Name').fill('Twice');
  const create = page.getByRole('button', { name: 'Create key' });
  await create.focus();
  await page.keyboard.press('Enter');
  await page.keyboard.press('Enter');
  await waitUntil(() => posts > 0, 'the first submission was sent');
  assert.is(await create.getAttribute('aria-disabled'), 'true');
  assert.is(await focused(page), 'BUTTON Create key', 'the button kept focus while its request ran');
  release();
  await page.getByText('Copy it now').waitFor();
  await page.waitForLoadState('networkidle');
  assert.is(posts, 1);
  const keys = (await call(f.t, 'GET', `/v1/projects/${f.projectId}/api-keys`, { as: await ownerCookie(f) })).json().apiKeys as Array<{ name: string }>;
  assert.is(keys.filter((key) => key.name === 'Twice').length, 1);
  assert.equal(problems, []);
  await context.close();
});

test('revoking a key with the keyboard leaves focus on the notice that says so', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, f);
  await page.goto(`${f.origin}/projects/${f.projectId}/api-keys`);
  await page.getByRole('button', { name: 'Revoke Backend' }).press('Enter');
  await page.getByRole('status').getByText('Revoked Backend.').waitFor();
  // Said as soon as Relay answered; the button goes once the list is drawn again.
  await page.getByRole('button', { name: 'Revoke Backend' }).waitFor({ state: 'detached' });
  assert.is(await focused(page), 'DIV Revoked Backend.');
  assert.equal(problems, []);
  await context.close();
});

test('a domain\'s actions with the keyboard: a rotation leaves focus on its notice, a project\'s toggle on the toggle drawn again', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  page.on('dialog', (dialog) => void dialog.accept());
  await signIn(page, f);
  await page.goto(`${f.origin}/workspaces/${f.workspaceId}/domains/${f.domainId}`);
  await page.getByRole('button', { name: 'Rotate DKIM key' }).press('Enter');
  await page.getByRole('status').getByText('New DKIM key made').waitFor();
  assert.match(await focused(page), /^DIV New DKIM key made/);

  await page.getByRole('button', { name: 'Disconnect Storefront' }).press('Enter');
  await page.getByRole('status').getByText('Disconnected.').waitFor();
  assert.is(await focused(page), 'BUTTON Connect Storefront');
  await page.keyboard.press('Enter');
  await page.getByRole('status').getByText('Connected.').waitFor();
  assert.is(await focused(page), 'BUTTON Disconnect Storefront');
  assert.equal(problems, []);
  await context.close();
});

test.run();
