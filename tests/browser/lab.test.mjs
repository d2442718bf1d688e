// End-to-end tests of the addnorm lab page in a real headless browser (Debian's Chromium, driven
// by playwright-core). The page must show exactly what the JSON API answers, and the API what the
// library computes (the C++ API tests check that half), so each test moves a control the way a
// person would and compares the drawn bars and printed numbers with the API's answer for the same
// parameters. Run by scripts/browser-tests.sh, which starts `addnorm lab` and sets LAB_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const LAB_URL = process.env.LAB_URL;
if (!LAB_URL) throw new Error('LAB_URL is not set: run scripts/browser-tests.sh');
const SCREENSHOTS = process.env.SCREENSHOT_DIR || 'screenshots';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
mkdirSync(SCREENSHOTS, { recursive: true });

let browser;
let page;
const pageErrors = [];

async function api(path, body) {
  const response = await fetch(new URL(path, LAB_URL), {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(response.status, 200, `${path} answered ${response.status}`);
  return response.json();
}

// Runs `action`, then waits until the widget `sectionId` has drawn a newer answer.
async function changed(sectionId, action) {
  const before = await page.$eval(`#${sectionId}`, (s) => Number(s.dataset.updates || 0));
  await action();
  await page.waitForFunction(([id, n]) => Number(document.getElementById(id).dataset.updates || 0) > n,
    [sectionId, before]);
  // A burst of input events may still be in flight: wait until the count stops moving.
  let count = -1;
  for (;;) {
    await page.waitForTimeout(60);
    const now = await page.$eval(`#${sectionId}`, (s) => Number(s.dataset.updates || 0));
    if (now === count) break;
    count = now;
  }
}

async function barValues(chartId) {
  return page.$$eval(`#${chartId} .bar`, (bars) => bars.map((bar) => Number(bar.dataset.value)));
}

async function text(selector) {
  return page.$eval(selector, (element) => element.textContent);
}

function sameNumbers(actual, expected, message) {
  assert.equal(actual.length, expected.length, `${message}: ${actual.length} bars, expected ${expected.length}`);
  expected.forEach((value, i) => {
    if (value === null) return;  // not finite: drawn as an empty bar
    assert.ok(Math.abs(actual[i] - value) <= 1e-12 * Math.max(1, Math.abs(value)),
      `${message}: bar ${i} is ${actual[i]}, the API says ${value}`);
  });
}

before(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage'],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  page = await context.newPage();
  page.on('pageerror', (error) => pageErrors.push(String(error)));
  page.on('console', (message) => { if (message.type() === 'error') pageErrors.push(message.text()); });
  await page.goto(LAB_URL);
  await page.waitForSelector('body[data-ready=true]', { timeout: 30000 });
});

after(async () => {
  await browser?.close();
});

test('the page loads and every widget draws its first answer', async () => {
  for (const id of ['residuals', 'normalization', 'steps', 'batch-vs-layer', 'deep-stacks']) {
    const updates = await page.$eval(`#${id}`, (s) => Number(s.dataset.updates || 0));
    assert.ok(updates >= 1, `${id} has not drawn`);
  }
  assert.deepEqual(pageErrors, []);
  await page.screenshot({ path: join(SCREENSHOTS, 'lab-page.png'), fullPage: true });
});

test('1 Residuals: the page figures, the toggle, the slider and the keyboard', async () => {
  // Default: 6 layers with residuals, the page's figures printed.
  const figures = await text('#residual-page-figures');
  for (const figure of ['8.62e-04', '3.31', '6.86e-14', '2.79']) {
    assert.ok(figures.includes(figure), `"${figures}" lacks ${figure}`);
  }
  let answer = await api('/api/gradient-flow', { depths: [6, 24], weight_std: 0.1 });
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].with_residual].reverse(), 'with residuals, 6 layers');
  assert.match(await text('#residual-readout'), /3\.31/);

  await changed('residuals', () => page.getByLabel('Without residuals').check());
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].without_residual].reverse(), 'without, 6 layers');
  assert.match(await text('#residual-readout'), /8\.62e-04/);

  await changed('residuals', () => page.locator('#residual-layers').fill('24'));
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[1].without_residual].reverse(), 'without, 24 layers');
  assert.match(await text('#residual-readout'), /6\.86e-14/);

  // The keyboard: End takes the slider to 50 layers.
  await page.locator('#residual-layers').focus();
  await changed('residuals', () => page.keyboard.press('End'));
  answer = await api('/api/gradient-flow', { depths: [6, 24, 50], weight_std: 0.1 });
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[2].without_residual].reverse(), 'without, 50 layers');

  // Arrow keys walk the bars and show each number.
  await page.locator('#residual-chart').focus();
  await page.keyboard.press('Home');
  const tip = await text('#residual-chart .tip');
  assert.match(tip, /gradient reaching the input: /);

  await changed('residuals', () => page.getByLabel('With residuals').check());
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[2].with_residual].reverse(), 'with, 50 layers');
  await page.locator('#residuals').screenshot({ path: join(SCREENSHOTS, 'residuals.png') });
});

test('2 Normalization: σ explodes without a norm and stays at 1 with one', async () => {
  const none = await api('/api/activation-growth', { layers: 24, gain: 1.4, modes: ['none'] });
  sameNumbers(await barValues('growth-std-chart'), none.curves[0].std, 'no normalization σ');
  assert.match(await text('#growth-readout'), /first passes 100 at layer \d+/);

  await changed('normalization', () => page.locator('#normalization').getByLabel('LayerNorm', { exact: true }).check());
  const layerNorm = await api('/api/activation-growth', { layers: 24, gain: 1.4, modes: ['layer_norm'] });
  sameNumbers(await barValues('growth-std-chart'), layerNorm.curves[0].std, 'LayerNorm σ');
  sameNumbers(await barValues('growth-mean-chart'), layerNorm.curves[0].mean, 'LayerNorm mean');
  const finalStd = Number(await page.$eval('#growth-readout', (e) => e.dataset.finalStd));
  assert.ok(Math.abs(finalStd - 1) < 0.01, `LayerNorm's final σ is ${finalStd}`);

  await changed('normalization', () => page.locator('#normalization').getByLabel(/Pre-norm/).check());
  await changed('normalization', () => page.locator('#growth-layers').fill('50'));
  const preNorm = await api('/api/activation-growth', { layers: 50, gain: 1.4, modes: ['pre_norm'] });
  sameNumbers(await barValues('growth-std-chart'), preNorm.curves[0].std, 'pre-norm σ, 50 layers');
  await changed('normalization', () => page.locator('#normalization').getByLabel('RMSNorm', { exact: true }).check());
  await page.locator('#normalization').screenshot({ path: join(SCREENSHOTS, 'normalization.png') });
});

test('3 Normalization steps: tabs, μ and σ after each step, presets and sliders', async () => {
  const tabs = page.getByRole('tab');
  await tabs.nth(1).click();
  assert.match(await text('#steps-stats'), /μ = 0\.0000/);
  // The keyboard: the arrow key moves to the next tab.
  await page.keyboard.press('ArrowRight');
  assert.equal(await tabs.nth(2).getAttribute('aria-selected'), 'true');
  assert.match(await text('#steps-stats'), /σ = 1\.0000/);
  assert.equal(await text('#steps-values'), '[0.3922, −1.5689, 0.0000, 1.1767]');
  await page.keyboard.press('ArrowRight');
  const page001 = await api('/api/norm-steps', { x: [2, -3, 1, 4], gamma: [2], beta: [0.5], norm: 'layer_norm', eps: 0 });
  sameNumbers(await barValues('steps-chart'), page001.steps[3].values, 'scale and shift');

  await changed('steps', () => page.getByRole('button', { name: /cat/ }).click());
  await tabs.nth(2).click();
  assert.equal(await text('#steps-values'), '[−1.3416, −0.4472, 0.4472, 1.3416]');

  await changed('steps', () => page.locator('#steps-gamma').fill('-1.5'));
  await changed('steps', () => page.locator('#steps-beta').fill('2'));
  await tabs.nth(3).click();
  const cat = await api('/api/norm-steps', { x: [2, 4, 6, 8], gamma: [-1.5], beta: [2], norm: 'layer_norm', eps: 1e-5 });
  sameNumbers(await barValues('steps-chart'), cat.steps[3].values, 'cat with γ −1.5, β 2');
  assert.match(await text('#steps-stats'), new RegExp(`μ = ${cat.steps[3].mean.toFixed(4)}`));

  // A bad entry is named, not sent.
  await page.locator('#steps-x').fill('2, x, 4');
  await page.waitForSelector('#steps-error:not([hidden])');
  assert.match(await text('#steps-error'), /^x: /);
  assert.equal(await page.getAttribute('#steps-x', 'aria-invalid'), 'true');
  await changed('steps', () => page.getByRole('button', { name: /Page/ }).click());
  await page.locator('#steps').screenshot({ path: join(SCREENSHOTS, 'steps.png') });
});

test('4 Batch norm vs layer norm: the house table, edited, and the padding leak', async () => {
  const cells = (id) => page.$$eval(`#${id} tbody td`, (tds) => tds.filter((td) => !td.classList.contains('stat'))
    .map((td) => Number(td.dataset.value)));
  const firstRow = await page.$$eval('#bvl-batch tbody tr:first-child td', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(firstRow, ['−1.1112', '−1.3363', '−1.3587']);
  const layerRow = await page.$$eval('#bvl-layer tbody tr:first-child td', (tds) => tds.map((td) => td.textContent));
  assert.deepEqual(layerRow.slice(0, 3), ['1.4135', '−0.7455', '−0.6680']);

  await changed('batch-vs-layer', () => page.getByLabel('house 1, size (f1)').fill('1000'));
  await changed('batch-vs-layer', () => page.getByRole('button', { name: 'Add a house' }).click());
  const edited = [1000, 2, 45, 1500, 3, 70, 2000, 3.5, 80, 2200, 3.85, 88];
  const answer = await api('/api/batch-vs-layer', { table: edited, table_columns: 3, lengths: [5, 3, 8, 2, 6, 4, 7, 1], batch_sizes: [1, 2, 4, 8], running_batches: 200 });
  sameNumbers(await cells('bvl-batch'), answer.table.batch_norm, 'batch norm of the edited table');
  sameNumbers(await cells('bvl-layer'), answer.table.layer_norm, 'layer norm of the edited table');
  await page.locator('#batch-vs-layer').screenshot({ path: join(SCREENSHOTS, 'batch-vs-layer.png') });

  await changed('batch-vs-layer', () => page.getByRole('button', { name: 'Remove house 2' }).click());
  assert.equal(await page.$$eval('#bvl-batch tbody tr', (rows) => rows.length), 3);

  await changed('batch-vs-layer', () => page.locator('#bvl-lengths').fill('6, 1, 2'));
  assert.equal(await page.$$eval('#bvl-padded .row', (rows) => rows.length), 3);
  assert.equal(await page.$$eval('#bvl-padded .row:nth-child(2) .cell.pad', (cells) => cells.length), 5);
  assert.match(await text('#bvl-leak'), /moves by up to \d/);
});

test('5 Deep stacks: a training streams its loss curves, and the stop button stops one', async () => {
  await page.locator('#train-steps').fill('30');
  await page.locator('#train-depth').fill('2');
  await page.getByRole('button', { name: 'Train' }).click();
  await page.waitForFunction(() => Number(document.getElementById('train-chart').dataset.steps) >= 3);
  const early = await page.$eval('#train-chart polyline', (line) => Number(line.dataset.points));
  await page.waitForFunction(() => document.getElementById('train-chart').dataset.state === 'done', null, { timeout: 60000 });
  const late = await page.$$eval('#train-chart polyline', (lines) => lines.map((line) => Number(line.dataset.points)));
  assert.equal(late.length, 2, 'post-norm and pre-norm curves');
  assert.ok(late[0] === 30 && late[0] > early, `the curve grew from ${early} to ${late[0]} points`);
  assert.match(await text('#train-status'), /accuracy \d+%/);
  await page.locator('#deep-stacks').screenshot({ path: join(SCREENSHOTS, 'deep-stacks.png') });

  await page.locator('#train-steps').fill('1000');
  await page.getByRole('button', { name: 'Train' }).click();
  await page.waitForFunction(() => Number(document.getElementById('train-chart').dataset.steps) >= 2);
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.waitForFunction(() => document.getElementById('train-chart').dataset.state === 'stopped');
  assert.match(await text('#train-status'), /stopped by request/);
  assert.ok(Number(await page.$eval('#train-chart', (c) => c.dataset.steps)) < 1000);

  // Gradients at initialisation: one bar per block for each placement, the API's numbers.
  const init = await api('/api/init-gradients', { placements: ['post_norm', 'pre_norm'], depths: [12], d_model: 32, n_heads: 4, d_ff: 64, seeds: 1, batch: 4, length: 6 });
  const perBlock = (s) => s.attention_grad_norm.map((a, i) => Math.hypot(a, s.ffn_grad_norm[i]));
  sameNumbers(await barValues('init-post-chart'), perBlock(init.stacks[0]), 'post-norm gradients at init');
  sameNumbers(await barValues('init-pre-chart'), perBlock(init.stacks[1]), 'pre-norm gradients at init');
  assert.deepEqual(pageErrors, []);
});

test('the page reads at phone width without sideways scrolling', async () => {
  const phone = await browser.newPage({ viewport: { width: 390, height: 844 } });
  await phone.goto(LAB_URL);
  await phone.waitForSelector('body[data-ready=true]');
  const overflow = await phone.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 1, `the page is ${overflow}px wider than the phone`);
  await phone.screenshot({ path: join(SCREENSHOTS, 'lab-phone.png'), fullPage: true });
  await phone.close();
});

test('every control has a label', async () => {
  const unlabelled = await page.$$eval('input, select, button', (controls) => controls
    .filter((c) => !(c.labels?.length || c.getAttribute('aria-label') || c.textContent.trim()))
    .map((c) => c.outerHTML.slice(0, 80)));
  assert.deepEqual(unlabelled, []);
});
