// End-to-end tests of the addnorm lab page in a real headless browser (Debian's Chromium, driven
// by playwright-core). The page must show exactly what the JSON API answers, and the API what the
// library computes (the C++ API tests check that half), so each test moves a control the way a
// person would and compares the drawn bars and printed numbers with the API's answer for the same
// parameters. Run by scripts/browser-tests.sh, which starts `addnorm lab` and sets LAB_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { num } from '../../web/js/format.js';

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

// The series a chart drew, exactly (chart.js keeps them on the chart as data-series).
async function chartSeries(chartId) {
  return page.$eval(`#${chartId}`, (chart) => JSON.parse(chart.dataset.series));
}

// A training stream's losses, per run, read straight from the API.
async function streamedLosses(body) {
  const response = await fetch(new URL('/api/train', LAB_URL), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(response.status, 200);
  const events = (await response.text()).split('\n\n').filter((block) => block.includes('event: step'));
  const steps = events.map((block) => JSON.parse(block.split('data: ')[1]).loss);
  return steps[0].map((_, run) => steps.map((losses) => losses[run]));
}

const mean = (values) => values.reduce((sum, v) => sum + v, 0) / values.length;

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
});

test('1 Residuals: the page figures, the toggle, the slider and the keyboard', async () => {
  // Default: 6 layers with residuals, the page's figures printed.
  const figures = await text('#residual-page-figures');
  for (const figure of ['8.62e-04', '3.31', '6.86e-14', '2.79']) {
    assert.ok(figures.includes(figure), `"${figures}" lacks ${figure}`);
  }
  let answer = await api('/api/gradient-flow', { depths: [6, 24], weight_std: 0.1, spread_seeds: 0 });
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].with_residual].reverse(), 'with residuals, 6 layers');
  assert.match(await text('#residual-readout'), /3\.31/);
  // Sizes between 2 and 3.31 span less than 30×: a linear axis from zero, its baseline labelled 0.
  assert.equal(await page.$eval('#residual-chart', (c) => c.dataset.scale), 'linear');
  assert.ok((await page.$$eval('#residual-chart text.tick', (ts) => ts.map((t) => t.textContent))).includes('0'));
  assert.match(await page.$eval('#residual-chart text.axis-title', (t) => t.textContent), /linear scale/);
  // The sentence is computed from the bars: bottom / top.
  const six = answer.stacks[0];
  assert.ok(Math.abs(Number(await page.$eval('#residual-readout', (e) => e.dataset.ratio)) - six.with_residual[6] / answer.top_norm) < 1e-12);

  await changed('residuals', () => page.getByLabel('Without residuals').check());
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].without_residual].reverse(), 'without, 6 layers');
  assert.match(await text('#residual-readout'), /8\.62e-04/);

  await changed('residuals', () => page.locator('#residual-layers').fill('24'));
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[1].without_residual].reverse(), 'without, 24 layers');
  assert.match(await text('#residual-readout'), /6\.86e-14/);
  // 13 decades: a log axis over whole decades, every bar above its baseline.
  assert.equal(await page.$eval('#residual-chart', (c) => c.dataset.scale), 'log');
  assert.match(await page.$eval('#residual-chart text.axis-title', (t) => t.textContent), /log scale/);

  // The keyboard: End takes the slider to 50 layers.
  await page.locator('#residual-layers').focus();
  await changed('residuals', () => page.keyboard.press('End'));
  answer = await api('/api/gradient-flow', { depths: [6, 24, 50], weight_std: 0.1, spread_seeds: 0 });
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
  const none = await api('/api/activation-growth', { layers: 24, gain: 1.4, modes: ['none'], spread_seeds: 0 });
  sameNumbers(await barValues('growth-std-chart'), none.curves[0].std, 'no normalization σ');
  assert.match(await text('#growth-readout'), /first passes 100 at layer \d+/);

  await changed('normalization', () => page.locator('#normalization').getByLabel('LayerNorm', { exact: true }).check());
  const layerNorm = await api('/api/activation-growth', { layers: 24, gain: 1.4, modes: ['layer_norm'], spread_seeds: 0 });
  sameNumbers(await barValues('growth-std-chart'), layerNorm.curves[0].std, 'LayerNorm σ');
  sameNumbers(await barValues('growth-mean-chart'), layerNorm.curves[0].mean, 'LayerNorm mean');
  const finalStd = Number(await page.$eval('#growth-readout', (e) => e.dataset.finalStd));
  assert.ok(Math.abs(finalStd - 1) < 0.01, `LayerNorm's final σ is ${finalStd}`);

  await changed('normalization', () => page.locator('#normalization').getByLabel(/Pre-norm/).check());
  await changed('normalization', () => page.locator('#growth-layers').fill('50'));
  const preNorm = await api('/api/activation-growth', { layers: 50, gain: 1.4, modes: ['pre_norm'], spread_seeds: 0 });
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

test('5 Deep stacks: axes and legend before training, loss curves with their seed spread, stop', async () => {
  // Before any run: the axes, the stated scale and a legend entry per checked placement.
  const legend = await page.$$eval('#train-chart .legend li', (items) => items.map((item) => item.textContent));
  assert.deepEqual(legend, ['post-norm, 6 blocks', 'pre-norm, 6 blocks', 'chance level']);
  assert.ok(await page.$$eval('#train-chart text.tick', (ticks) => ticks.length) >= 4, 'no axis ticks before training');
  assert.match(await page.$eval('#train-chart', (c) => c.textContent), /optimiser step/);

  await page.locator('#train-steps').fill('30');
  await page.locator('#train-depth').fill('2');
  await page.locator('#train-seeds').selectOption('2');
  await page.getByRole('button', { name: 'Train' }).click();
  await page.waitForFunction(() => Number(document.getElementById('train-chart').dataset.steps) >= 3);
  const early = await page.$eval('#train-chart polyline', (line) => Number(line.dataset.points));
  await page.waitForFunction(() => document.getElementById('train-chart').dataset.state === 'done', null, { timeout: 60000 });
  const late = await page.$$eval('#train-chart polyline:not(.reference)', (lines) => lines.map((line) => Number(line.dataset.points)));
  assert.equal(late.length, 2, 'post-norm and pre-norm curves');
  assert.ok(late[0] === 30 && late[0] > early, `the curve grew from ${early} to ${late[0]} points`);
  assert.equal(await page.$$eval('#train-chart polygon.band', (bands) => bands.length), 2, 'a seed band per placement');
  assert.match(await text('#train-status'), /accuracy \d+%/);
  // The lines are the mean of the two seeds' streamed losses, the bands their range.
  const runs = await streamedLosses({ placements: ['post_norm', 'pre_norm'], depths: [2], steps: 30, lr: 0.001,
    task: 'reverse', warmups: [false], warmup_steps: 8, seeds: 2, grad_history_points: 1 });
  const drawn = await chartSeries('train-chart');
  for (const [line, seedRuns] of [[drawn[0], [runs[0], runs[1]]], [drawn[1], [runs[2], runs[3]]]]) {
    sameNumbers(line.values, seedRuns[0].map((_, i) => mean([seedRuns[0][i], seedRuns[1][i]])), `${line.name} mean`);
    sameNumbers(line.low, seedRuns[0].map((_, i) => Math.min(seedRuns[0][i], seedRuns[1][i])), `${line.name} low`);
    sameNumbers(line.high, seedRuns[0].map((_, i) => Math.max(seedRuns[0][i], seedRuns[1][i])), `${line.name} high`);
  }
  await page.locator('#deep-stacks').screenshot({ path: join(SCREENSHOTS, 'deep-stacks.png') });

  await page.locator('#train-seeds').selectOption('1');
  await page.locator('#train-steps').fill('1000');
  await page.getByRole('button', { name: 'Train' }).click();
  await page.waitForFunction(() => Number(document.getElementById('train-chart').dataset.steps) >= 2);
  await page.getByRole('button', { name: 'Stop' }).click();
  await page.waitForFunction(() => document.getElementById('train-chart').dataset.state === 'stopped');
  assert.match(await text('#train-status'), /stopped by request/);
  assert.ok(Number(await page.$eval('#train-chart', (c) => c.dataset.steps)) < 1000);

  // Gradients at initialisation: post-norm and pre-norm bars on one axis, the API's numbers,
  // and a sentence computed from them.
  const init = await api('/api/init-gradients', { placements: ['post_norm', 'pre_norm'], depths: [12], d_model: 32, n_heads: 4, d_ff: 64, seeds: 1, batch: 4, length: 6 });
  const perBlock = (s) => s.attention_grad_norm.map((a, i) => Math.hypot(a, s.ffn_grad_norm[i]));
  const bars = await page.$$eval('#init-chart .bar', (all) => all.map((bar) => ({ series: bar.dataset.series, value: Number(bar.dataset.value) })));
  sameNumbers(bars.filter((b) => b.series === '0').map((b) => b.value), perBlock(init.stacks[0]), 'post-norm gradients at init');
  sameNumbers(bars.filter((b) => b.series === '1').map((b) => b.value), perBlock(init.stacks[1]), 'pre-norm gradients at init');
  const readout = await text('#init-readout');
  for (const stack of init.stacks) {
    const values = perBlock(stack);
    const ratio = (values.at(-1) / values[0]).toFixed(3);
    assert.ok(readout.includes(`top / bottom ${ratio}`) || readout.includes(`top block / bottom block ${ratio}`),
      `"${readout}" lacks the ratio ${ratio}`);
  }
  assert.deepEqual(pageErrors, []);
});

test('5 Deep stacks: rank collapse per placement and a small trainability map, the API\'s numbers', async () => {
  const { RANK_REQUEST, MAP_REQUEST } = await import('../../web/js/rank_collapse.js');
  await page.waitForFunction(() => document.querySelectorAll('#rank-chart polyline').length >= 5);
  // Move Blocks to 8: the chart redraws the API's medians and quartiles for 8 blocks.
  await changed('deep-stacks', () => page.locator('#rank-depth').fill('8'));
  const answer = await api('/api/rank-collapse', { ...RANK_REQUEST, depth: 8 });
  const drawn = await chartSeries('rank-chart');
  assert.deepEqual(drawn.map((line) => line.name), ['bare', 'no residual', 'no norm', 'post-norm', 'pre-norm']);
  answer.curves.forEach((curve, p) => {
    assert.equal(drawn[p].values.length, 9, `${curve.placement}: the input and 8 blocks`);
    sameNumbers(drawn[p].values, curve.residual.map((s) => s.median), `${curve.placement} median residual`);
    sameNumbers(drawn[p].low, curve.residual.map((s) => s.q25), `${curve.placement} 25th percentile`);
  });
  // The effect the text describes: without a skip the tokens collapse, with one they do not.
  const bare = answer.curves[0];
  const pre = answer.curves[4];
  assert.ok(bare.residual.at(-1).median < 1e-5 && pre.residual.at(-1).median > 0.3);
  const readout = await text('#rank-readout');
  assert.match(readout, new RegExp(`bare [^;]*collapsed at block ${bare.collapsed_at}`));
  assert.match(readout, /pre-norm [^;]*never below/);

  // The map: one cell per placement and setting, each the API's held-out loss and verdict.
  const start = page.getByRole('button', { name: 'Run the map' });
  await start.click();
  await page.waitForFunction(() => document.getElementById('map-table').dataset.state === 'done', null, { timeout: 120000 });
  const map = await api('/api/trainability-map', MAP_REQUEST);
  const cells = await page.$$eval('#map-table tbody td', (all) => all.map((td) => ({ loss: Number(td.dataset.loss), trained: Number(td.dataset.trained), text: td.textContent })));
  assert.equal(cells.length, map.cells.length);
  // The table is placement by placement, then depth, lr, schedule: the map's own cell order.
  map.cells.forEach((cell, i) => {
    assert.equal(cells[i].loss, cell.final_loss.median, `cell ${i}`);
    assert.equal(cells[i].trained, cell.trained, `cell ${i} trained`);
    assert.equal(cells[i].text.endsWith('✓'), cell.trained > 0);
  });
  assert.match(await text('#map-readout'), /^Trained, of 8 settings: post-norm \d, pre-norm \d, DeepNorm \d, Admin \d/);
  assert.equal(await start.isEnabled(), true);
  assert.deepEqual(pageErrors, []);
});

test('6 Depth, measured: the gradient ratio with its √L line and the update sizes, per seed', async () => {
  await page.waitForSelector('#depth-results[data-state=done]', { timeout: 60000 });
  const depths = [2, 4, 8, 16];
  const model = { d_model: 32, n_heads: 4, d_ff: 64, batch: 4, length: 6, task: 'copy', depths, seeds: 1 };
  const find = (answer, placement, depth) => answer.stacks.find((s) => s.placement === placement && s.depth === depth);
  const init = [];
  for (const seed of [0, 1]) init.push(await api('/api/init-gradients', { ...model, placements: ['post_norm', 'pre_norm'], seed }));
  const ratios = init.map((answer) => depths.map((d) => find(answer, 'post_norm', d).mean_layer_grad_norm / find(answer, 'pre_norm', d).mean_layer_grad_norm));
  const [ratio, reference] = await chartSeries('ratio-chart');
  sameNumbers(ratio.values, depths.map((_, i) => mean([ratios[0][i], ratios[1][i]])), 'post/pre ratio, mean of 2 seeds');
  sameNumbers(ratio.low, depths.map((_, i) => Math.min(ratios[0][i], ratios[1][i])), 'ratio, lowest seed');
  sameNumbers(ratio.high, depths.map((_, i) => Math.max(ratios[0][i], ratios[1][i])), 'ratio, highest seed');
  // Token cosine through the 16-block stacks: the mean over the two seeds, per placement.
  const cosine = await chartSeries('cosine-chart');
  assert.deepEqual(cosine.map((line) => line.name), ['post-norm', 'pre-norm']);
  ['post_norm', 'pre_norm'].forEach((placement, p) => {
    sameNumbers(cosine[p].values, find(init[0], placement, 16).token_cosine.map((v, i) => mean([v, find(init[1], placement, 16).token_cosine[i]])), `${placement} token cosine`);
  });
  assert.match(await text('#cosine-readout'), new RegExp(`tokens' mean cosine is ${cosine[0].values[16].toFixed(3)} in post-norm`));
  sameNumbers(reference.values, depths.map((d) => ratio.values[0] * Math.sqrt(d / 2)), '√L reference');
  assert.match(await text('#ratio-readout'), new RegExp(`to ${ratio.values[3].toFixed(3)}, ×${(ratio.values[3] / ratio.values[0]).toFixed(3)}`));
  // The keyboard reads each depth's exact numbers: End jumps to the deepest.
  await page.locator('#ratio-chart').focus();
  await page.keyboard.press('End');
  const tip = await text('#ratio-chart .tip');
  assert.ok(tip.startsWith('depth L (blocks) 16: post-norm / pre-norm: ') && tip.includes(ratio.values[3].toFixed(4)) &&
    tip.includes(`seeds ${ratio.low[3].toFixed(4)} to ${ratio.high[3].toFixed(4)}`), `tooltip "${tip}"`);

  // The update size at a learning rate picked on the page.
  await changed('depth-results', () => page.locator('#update-lr').selectOption('0.003'));
  const placements = ['post_norm', 'pre_norm', 'deep_norm'];
  const sizes = [];
  for (const seed of [0, 1]) sizes.push(await api('/api/update-size', { ...model, placements, lrs: [0.003], seed }));
  const drawn = await chartSeries('update-chart');
  assert.deepEqual(drawn.map((line) => line.name), ['post-norm', 'pre-norm', 'DeepNorm']);
  placements.forEach((placement, p) => {
    const perSeed = sizes.map((answer) => depths.map((d) => find(answer, placement, d).output_change));
    sameNumbers(drawn[p].values, depths.map((_, i) => mean([perSeed[0][i], perSeed[1][i]])), `${placement} output change`);
  });
  const blocks = await chartSeries('update-blocks-chart');
  sameNumbers(blocks[0].values, find(sizes[0], 'post_norm', 16).layer_change.map((v, i) => mean([v, find(sizes[1], 'post_norm', 16).layer_change[i]])), 'post-norm change per block');
  assert.match(await text('#update-readout'), new RegExp(`lr 3e-3, one step moves a 16-block stack's output by post-norm ${drawn[0].values[3].toFixed(3)}`));
  await page.locator('#depth-results').screenshot({ path: join(SCREENSHOTS, 'depth-results.png') });
});

// A diagnose file made the way a user makes one: `python -m addnorm diagnose` on a small
// pre-norm TransformerEncoder, three seeds (ADDNORM_PYTHONPATH: the build's Python package, set
// by scripts/browser-tests.sh).
function diagnoseFile() {
  const pythonPath = process.env.ADDNORM_PYTHONPATH;
  if (!pythonPath) throw new Error('ADDNORM_PYTHONPATH is not set: run scripts/browser-tests.sh');
  const dir = mkdtempSync(join(tmpdir(), 'diagnose-'));
  writeFileSync(join(dir, 'small_model.py'), [
    'import torch',
    'def build(seed=0):',
    '    torch.manual_seed(seed)',
    '    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=True)',
    '    model = torch.nn.TransformerEncoder(layer, 5, enable_nested_tensor=False)',
    '    return model, torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(seed))',
    ''].join('\n'));
  execFileSync('/usr/bin/python3', ['-m', 'addnorm', 'diagnose', 'small_model:build', '--seeds', '3', '--json', 'd.json'],
    { cwd: dir, env: { ...process.env, PYTHONPATH: pythonPath }, stdio: 'pipe', timeout: 120000 });
  writeFileSync(join(dir, 'wrong.json'), JSON.stringify({ structure: { model: 'M' }, placement: 'pre_norm', blocks: 'none' }));
  return { dir, path: join(dir, 'd.json'), data: JSON.parse(readFileSync(join(dir, 'd.json'), 'utf8')) };
}

test('7 Your model: a diagnose file drawn block by block beside the lab, a wrong file refused by field', async () => {
  const { dir, path, data } = diagnoseFile();
  await changed('diagnosis', () => page.locator('#diagnosis-file').setInputFiles(path));
  assert.equal(await page.$eval('#diagnosis-results', (e) => e.hidden), false);
  const [grad] = await chartSeries('diagnosis-grad-chart');
  sameNumbers(grad.values, data.blocks.map((b) => b.grad_norm.median), 'gradient norm per block');
  sameNumbers(grad.low, data.blocks.map((b) => b.grad_norm.q25), 'gradient norm, lower quartile');
  const [stream] = await chartSeries('diagnosis-stream-chart');
  sameNumbers(stream.values, data.blocks.map((b) => b.stream_rms_in.median), 'stream RMS per block');
  const [cosine, residual] = await chartSeries('diagnosis-token-chart');
  sameNumbers(cosine.values, data.blocks.map((b) => b.token_cosine.median), 'token cosine per block');
  sameNumbers(residual.values, data.blocks.map((b) => b.relative_residual.median), 'relative residual per block');
  assert.equal(await text('#diagnosis-model'), `TransformerEncoder: 5 blocks, placement pre_norm, median [IQR] over 3 runs`);
  const rows = await page.$$eval('#diagnosis-summary tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  assert.deepEqual(rows[0], ['measure', 'this model', `lab: pre_norm at ${data.lab_reference.depth} blocks`]);
  const spreadText = (v) => `${num(v.median, 3)} [${num(v.q25, 3)}, ${num(v.q75, 3)}]`;
  assert.deepEqual(rows[1], ['gradient, top block / bottom block', spreadText(data.summary.top_to_bottom),
    spreadText(data.lab_reference.top_to_bottom)]);
  assert.deepEqual(await page.$$eval('#diagnosis-verdicts li', (items) => items.map((li) => li.textContent)), data.verdicts);
  await page.locator('#diagnosis').screenshot({ path: join(SCREENSHOTS, 'diagnosis.png') });

  // A file that is not diagnose's: one message naming the field, the drawn model kept.
  await page.locator('#diagnosis-file').setInputFiles(join(dir, 'wrong.json'));
  await page.waitForSelector('#diagnosis-error:not([hidden])');
  assert.equal(await text('#diagnosis-error'), 'file: wrong.json: blocks is not a non-empty list');
  assert.equal(await page.$eval('#diagnosis-file', (e) => e.getAttribute('aria-invalid')), 'true');
  sameNumbers((await chartSeries('diagnosis-grad-chart'))[0].values, grad.values, 'the previous file stays drawn');
  assert.deepEqual(pageErrors, []);
});
