// Real headless Chromium for the dashboard's browser tests: Debian's /usr/bin/chromium (never a
// downloaded build) driven by playwright-core, a fresh profile per launch. Pages are watched for
// what a person would not see: a Content-Security-Policy refusal or an uncaught script error
// fails the test (`problems`). axe-core runs inside the page; screenshots go to test/artifacts/.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/** Why the browser suites cannot run here, or undefined when they can (CI installs chromium: .ci/run). */
export const chromiumMissing = existsSync(CHROMIUM) ? undefined : `${CHROMIUM} is missing (apt-get install chromium; .ci/run does it)`;

const ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

export const SCREENSHOTS = fileURLToPath(new URL('../artifacts/screenshots/', import.meta.url));

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export const DESKTOP = { width: 1280, height: 860 };
export const NARROW = { width: 375, height: 740 };

export interface WatchedPage {
  page: Page;
  /** CSP refusals, uncaught errors and failed module loads seen so far. */
  problems: string[];
}

export interface TestBrowser {
  browser: Browser;
  /** A fresh context (its own cookies: one person) with one page. */
  open(viewport?: { width: number; height: number }): Promise<WatchedPage & { context: BrowserContext }>;
  close(): Promise<void>;
}

export function watch(page: Page): WatchedPage {
  const problems: string[] = [];
  page.on('console', (message) => {
    const text = message.text();
    // An email's HTML and a template's preview are refused things on purpose (their CSP, the
    // sandbox: remote fonts, scripts); tests that frame one look at those messages themselves.
    const where = message.location().url;
    if (where.includes('/message.html') || where === 'about:srcdoc') return;
    if (/Content.Security.Policy|Refused to/i.test(text) || (message.type() === 'error' && !/Failed to load resource: the server responded with a status of (4\d\d)/.test(text))) {
      problems.push(`console ${message.type()}: ${text}`);
    }
  });
  page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
  return { page, problems };
}

export async function launchBrowser(): Promise<TestBrowser> {
  // Playwright starts Chromium with a new temporary --user-data-dir of its own each launch.
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ARGS });
  return {
    browser,
    async open(viewport = DESKTOP) {
      const context = await browser.newContext({ viewport });
      const page = await context.newPage();
      page.setDefaultTimeout(15_000);
      return { context, ...watch(page) };
    },
    close: () => browser.close(),
  };
}

export interface AxeViolation { id: string; impact: string | null; help: string; nodes: Array<{ target: string[] }> }

/**
 * axe-core's serious and critical violations on the page as it is now. The script is
 * evaluated through the DevTools protocol, which the page's CSP does not govern; the page's
 * own policy stays in force for everything else.
 */
export async function axeViolations(page: Page): Promise<AxeViolation[]> {
  // Strings, not functions: they run in the page, whose globals (window, document) the test's types do not know.
  if (!(await page.evaluate("'axe' in window"))) await page.evaluate(axeSource);
  const result = (await page.evaluate("axe.run(document, { resultTypes: ['violations'] })")) as { violations: AxeViolation[] };
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map((n) => ({ target: n.target })) }));
}

/**
 * axe-core's violations of the WCAG 2.1 A and AA rules on the page as it is now, whatever their
 * impact (a missing title or language is "serious", others less): "rule: element" each.
 */
export async function wcagViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate("'axe' in window"))) await page.evaluate(axeSource);
  const result = (await page.evaluate("axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] }, resultTypes: ['violations'] })")) as
    { violations: Array<{ id: string; nodes: Array<{ target: string[] }> }> };
  return result.violations.flatMap((v) => v.nodes.map((n) => `${v.id}: ${n.target.join(' ')}`));
}

/** Whether the page scrolls sideways: at 375 px nothing should. */
export const overflowsSideways = async (page: Page) => (await page.evaluate('document.documentElement.scrollWidth > window.innerWidth + 1')) as boolean;

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await page.screenshot({ path: `${SCREENSHOTS}${name}.png`, fullPage: true });
}
