// What the page's browser tests share (lab, learner, url_state): where the page and the API are,
// the engine's tolerance, a headless Chromium on the page, and the waits and reads every test
// uses. scripts/browser-tests.sh sets the environment: LAB_URL (the page: `addnorm lab`, or the
// static folder of scripts/web-static.sh), API_URL (the native server, where expected numbers come
// from), LAB_ENGINE (server | wasm), SCREENSHOT_DIR, CHROMIUM.
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { chromium } from 'playwright-core';

export const LAB_URL = process.env.LAB_URL;
if (!LAB_URL) throw new Error('LAB_URL is not set: run scripts/browser-tests.sh');
export const API_URL = process.env.API_URL || LAB_URL;
export const ENGINE = process.env.LAB_ENGINE || 'server';
// The server's page draws the API's own numbers. The WebAssembly engine computes them again with
// Highway's scalar target and plain-loop matrix products instead of AVX-512 and OpenBLAS: the same
// float32 arithmetic summed in another order, a few float32 ulps apart (what the numerics
// contract allows between SIMD targets), which a few dozen training steps keep within this.
export const TOLERANCE = ENGINE === 'wasm' ? 1e-6 : 1e-12;
export const SCREENSHOTS = process.env.SCREENSHOT_DIR || 'screenshots';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
mkdirSync(SCREENSHOTS, { recursive: true });

// POSTs to the native API; the answer's JSON.
export async function api(path, body) {
  const response = await fetch(new URL(path, API_URL), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, `${path} answered ${response.status}`);
  return response.json();
}

// The page the waits and reads below act on: the last one openPage opened (one per test file).
let current = null;

// Chromium on `address` (relative to LAB_URL): {browser, page, pageErrors, ready}, the page's
// uncaught errors and console errors collected as they come; `ready()` loads it and waits until
// the page says it is ready.
export async function openPage(address = '') {
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  current = page;
  const pageErrors = [];
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  page.on('console', (message) => { if (message.type() === 'error') pageErrors.push(message.text()); });
  return { browser, page, pageErrors, ready: async () => {
    await page.goto(new URL(address, LAB_URL).href);
    await page.waitForSelector('body[data-ready=true]', { timeout: 30000 });
  } };
}

// Runs `action`, then waits until the widget `sectionId` has drawn a newer answer and the count of
// answers has stopped moving (a burst of input events may still be in flight).
export async function changed(sectionId, action, page = current) {
  const before = await page.$eval(`#${sectionId}`, (s) => Number(s.dataset.updates || 0));
  await action();
  await page.waitForFunction(([id, n]) => Number(document.getElementById(id).dataset.updates || 0) > n,
    [sectionId, before]);
  let count = -1;
  for (;;) {
    await page.waitForTimeout(60);
    const now = await page.$eval(`#${sectionId}`, (s) => Number(s.dataset.updates || 0));
    if (now === count) break;
    count = now;
  }
}

export async function barValues(chartId, page = current) {
  return page.$$eval(`#${chartId} .bar`, (bars) => bars.map((bar) => Number(bar.dataset.value)));
}

export async function text(selector, page = current) {
  return page.$eval(selector, (element) => element.textContent);
}

// Drawn numbers against the API's, within the engine's TOLERANCE (null: not finite, drawn empty).
export function sameNumbers(actual, expected, message) {
  assert.equal(actual.length, expected.length, `${message}: ${actual.length} bars, expected ${expected.length}`);
  expected.forEach((value, i) => {
    if (value === null) return;
    assert.ok(Math.abs(actual[i] - value) <= TOLERANCE * Math.max(1, Math.abs(value)),
      `${message}: bar ${i} is ${actual[i]}, the API says ${value}`);
  });
}
