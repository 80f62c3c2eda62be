// After too many wrong passwords the sign-in page holds the button and counts the wait down
// ("Try again in 8 seconds.", "7 seconds", …), but a screen reader is told of the wait twice
// only: when it starts (its status line, with the wait's length) and when it is over ("You can
// try again now."). The count shown meanwhile is a timer outside that live region (role="timer",
// aria-live="off"): a live region's every change is read out, and a wait doubles with each wrong
// password up to 15 minutes, which would talk over the reader once a second meanwhile (WAI-ARIA
// 1.2 "timer"; WCAG 2.1 4.1.3 Status Messages, 2.2.2 Pause, Stop, Hide).
import * as assert from 'uvu/assert';
import type { Page } from 'playwright-core';
import { chromiumMissing, launchBrowser, type TestBrowser } from './support/browser.ts';
import { startDashboard, type DashboardFixture } from './support/dashboard.ts';
import { skippableSuite } from './support/skippable-suite.ts';

const test = skippableSuite<{ f: DashboardFixture; browser: TestBrowser }>('dashboard: the sign-in wait is announced when it starts and when it ends, not every second', chromiumMissing);

test.before(async (ctx) => {
  ctx.f = await startDashboard();
  ctx.browser = await launchBrowser();
});
test.after(async (ctx) => {
  await ctx.browser?.close();
  await ctx.f?.close();
});

/**
 * Records, in the page, the text of a live region each time it would be announced: a live region
 * added with text in it, or a change inside one, unless the change is within a nearer
 * role="timer" or aria-live="off" (whose changes are not read out).
 */
const RECORD_ANNOUNCEMENTS = `(() => {
  window.__announced = [];
  const LIVE = '[role=status], [role=alert], [role=log], [aria-live]:not([aria-live=off])';
  const OFF = '[role=timer]:not([aria-live]), [aria-live=off]';
  const record = (live) => {
    const text = live.textContent.replace(/\\s+/g, ' ').trim();
    if (text && window.__announced[window.__announced.length - 1] !== text) window.__announced.push(text);
  };
  new MutationObserver((mutations) => {
    for (const m of mutations) {
      for (const added of m.addedNodes) {
        if (added.nodeType !== 1) continue;
        for (const live of [added, ...added.querySelectorAll(LIVE)]) if (live.matches(LIVE) && live.isConnected) record(live);
      }
      const node = m.target.nodeType === 1 ? m.target : m.target.parentElement;
      if (!node) continue;
      const live = node.closest(LIVE);
      if (!live) continue;
      const off = node.closest(OFF);
      if (off && live.contains(off)) continue;
      record(live);
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
})()`;

const announced = (page: Page) => page.evaluate<string[]>('window.__announced');

test('page /sign-in, "Too many sign-in attempts": announced when the wait starts, with its length, and when it is over; the count is a timer', async ({ f, browser }) => {
  const { page, problems, context } = await browser.open();
  await page.goto(`${f.origin}/sign-in`);
  await page.getByLabel('Email').fill(f.owner.email);
  await page.getByLabel('Password').fill('not the password at all');
  await page.evaluate(RECORD_ANNOUNCEMENTS);
  const button = page.getByRole('button', { name: 'Sign in' });
  // Five wrong passwords are free, then the waits double (1 s, 2 s, 4 s …): go on until one is 3 s or more.
  let retryAfter = 0;
  for (let attempt = 1; attempt <= 20 && retryAfter < 3; attempt++) {
    await page.locator('button[type=submit]:not([disabled])').waitFor({ timeout: 20_000 });
    await page.evaluate('window.__announced = []');
    const [response] = await Promise.all([
      page.waitForResponse((r) => r.url().endsWith('/v1/session') && r.request().method() === 'POST'),
      button.click(),
    ]);
    if (response.status() === 429) retryAfter = Number(response.headers()['retry-after']);
  }
  assert.ok(retryAfter >= 3, `a wait of 3 s or more within 20 wrong passwords (last Retry-After ${retryAfter})`);
  // The count is shown, outside the live region.
  const timer = page.getByRole('timer');
  assert.match(await timer.innerText(), /^Try again in \d+ seconds?\.$/);
  assert.is(await timer.evaluate((element) => element.closest('[role=status], [role=alert], [aria-live]:not([aria-live=off])') === null
    || element.getAttribute('aria-live') === 'off'), true, 'the count is in no live region');
  // The wait runs out: the positive marker that every tick has been drawn.
  await page.getByText('You can try again now.').waitFor({ timeout: (retryAfter + 10) * 1000 });
  assert.is(await timer.count(), 0, 'the count is gone once the wait is over');
  const waits = (await announced(page)).filter((text) => text.includes('Too many sign-in attempts'));
  assert.is(waits.length, 2, `announced ${waits.length} times during a ${retryAfter} s wait, not twice:\n${waits.join('\n')}`);
  assert.match(waits[0], new RegExp(`retry in ${retryAfter} seconds`), 'the start says how long the wait is');
  assert.not.match(waits[0], /You can try again now/);
  assert.match(waits[1], /You can try again now\.$/, 'the end says the wait is over');
  assert.ok(await button.isEnabled());
  assert.equal(problems, []);
  await context.close();
});

test.run();
