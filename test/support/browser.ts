/**
 * A real browser for the console's suites: Chromium from the system (Debian's
 * `chromium` package, or CHROMIUM_PATH), driven by playwright-core. Nothing here
 * downloads a browser. Without Chromium the browser suites say plainly that they
 * skipped; with REQUIRE_BROWSER=1 (as .ci/run sets) that is a failure instead.
 *
 *   const chromium = browserUnderTest('console in a browser');   // undefined: skipped
 *   (chromium ? describe : describe.skip)('…', () => { … });
 */
import { existsSync } from 'node:fs';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { TEST_ADMIN_TOKEN } from './secrets.js';

const CANDIDATES = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter((p): p is string => !!p);

/** The Chromium executable to test with; undefined (after saying so) when there is none. */
export function browserUnderTest(suite: string): string | undefined {
  const found = CANDIDATES.find((path) => existsSync(path));
  if (found) return found;
  if (process.env.REQUIRE_BROWSER === '1') {
    throw new Error(`Chromium is required (REQUIRE_BROWSER=1) but none was found at ${CANDIDATES.join(', ')}: apt-get install -y chromium`);
  }
  process.stderr.write(`\n  SKIPPED: "${suite}": no Chromium at ${CANDIDATES.join(', ')} (apt-get install -y chromium, or set CHROMIUM_PATH)\n\n`);
  return undefined;
}

/**
 * Flags for this machine: headless, no sandbox (tests run as root), and none of
 * Chromium's own network traffic (updates, sync, field trials), which a closed
 * network refuses and which a test must not depend on.
 */
const FLAGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'];

export interface TestBrowser {
  browser: Browser;
  close(): Promise<void>;
}

/** One browser for a suite; playwright gives it a fresh, temporary profile of its own. */
export async function launchBrowser(executablePath: string): Promise<TestBrowser> {
  const browser = await chromium.launch({ executablePath, headless: true, args: FLAGS });
  return { browser, close: () => browser.close().catch(() => undefined) };
}

export interface ConsolePage {
  context: BrowserContext;
  page: Page;
  /** Uncaught errors in the page, and dialogs it opened (alert, confirm, prompt): both must stay empty. */
  errors: string[];
  dialogs: string[];
}

/** A fresh context (no cookies) at a laptop's size, watching for page errors and dialogs. */
export async function openConsole(browser: Browser): Promise<ConsolePage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const errors: string[] = [];
  const dialogs: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('dialog', (dialog) => {
    dialogs.push(`${dialog.type()}: ${dialog.message()}`);
    void dialog.dismiss();
  });
  return { context, page, errors, dialogs };
}

/** Signs in through the form, as a person would, and waits for the page behind it. */
export async function signInOnPage(page: Page, token = TEST_ADMIN_TOKEN): Promise<void> {
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}
