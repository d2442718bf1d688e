// End-to-end tests of the addnorm lab page in a real headless browser (Debian's Chromium, driven
// by playwright-core). The page must show exactly what the JSON API answers, and the API what the
// library computes (the C++ API tests check that half), so each test moves a control the way a
// person would and compares the drawn bars and printed numbers with the API's answer for the same
// parameters. Run by scripts/browser-tests.sh, which starts `addnorm lab` and sets LAB_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  API_URL, ENGINE, SCREENSHOTS, api, openPage, sameNumbers,
  changed, barValues, text,
} from './harness.mjs';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { num } from '../../web/js/format.js';

let browser;
let page;
let pageErrors = [];

// The trainability map's held-out losses after 300 steps, in nats: equal within this where a
// run has not learned the task (and both under the map's target_loss, its line for "trained",
// where it has).
const MAP_LOSS_TOLERANCE = 0.05;

const apiRequests = [];

// The series a chart drew, exactly (chart.js keeps them on the chart as data-series).
async function chartSeries(chartId) {
  return page.$eval(`#${chartId}`, (chart) => JSON.parse(chart.dataset.series));
}

// A training stream's losses, per run, read straight from the API.
async function streamedLosses(body) {
  const response = await fetch(new URL('/api/train', API_URL), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  assert.equal(response.status, 200);
  const blocks = (await response.text()).split('\n\n');
  const events = blocks.filter((block) => block.includes('event: step'));
  const steps = events.map((block) => JSON.parse(block.split('data: ')[1]).loss);
  const losses = steps[0].map((_, run) => steps.map((loss) => loss[run]));
  const done = blocks.find((block) => block.includes('event: done'));
  losses.done = JSON.parse(done.split('data: ')[1]);
  return losses;
}

const mean = (values) => values.reduce((sum, v) => sum + v, 0) / values.length;

before(async () => {
  let ready;
  ({ browser, page, pageErrors, ready } = await openPage());
  // The static folder's page computes everything itself: it must never ask for /api/.
  page.on('request', (request) => {
    if (new URL(request.url()).pathname.startsWith('/api/')) apiRequests.push(request.url());
  });
  await ready();
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
  if (ENGINE === 'wasm') {
    assert.match(await text('footer'), /computed in this browser \(WebAssembly\)/);
    assert.deepEqual(apiRequests, [], 'the static page asked a server');
  }
});

after(() => {
  // After every widget has run, training and the map included.
  if (ENGINE === 'wasm') assert.deepEqual(apiRequests, [], 'the static page asked a server');
});

test('1 Residuals: the page figures, the toggle, the slider and the keyboard', async () => {
  // Default: 6 layers with residuals, the page's figures printed.
  const figures = await text('#residual-page-figures');
  for (const figure of ['8.62e-04', '3.31', '6.86e-14', '2.79']) {
    assert.ok(figures.includes(figure), `"${figures}" lacks ${figure}`);
  }
  let answer = await api('/api/gradient-flow', { depths: [6, 24], weight_std: 0.1, spread_seeds: 0 });
  // Both curves on one axis, with residuals highlighted (its bars are the chart's .bar).
  let both = await chartSeries('residual-chart');
  assert.deepEqual(both.map((s) => s.name), ['with residuals', 'without residuals']);
  sameNumbers(both[0].values, [...answer.stacks[0].with_residual].reverse(), 'with residuals, 6 layers');
  sameNumbers(both[1].values, [...answer.stacks[0].without_residual].reverse(), 'without residuals, 6 layers');
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].with_residual].reverse(), 'with residuals highlighted, 6 layers');
  assert.equal(await page.$$eval('#residual-chart .bar-muted', (bars) => bars.length), 7);
  assert.match(await text('#residual-readout'), /3\.31/);
  // One log axis at every setting, stated on the axis: the sizes span decades (3.31 down to 8.62e-04).
  assert.equal(await page.$eval('#residual-chart', (c) => c.dataset.scale), 'log');
  assert.match(await page.$eval('#residual-chart text.axis-title', (t) => t.textContent), /log scale/);
  const ticksWith = await page.$$eval('#residual-chart text.tick', (ts) => ts.map((t) => t.textContent));
  // The equation under the chart: the expected size factors per layer, as the API's expected curves have them.
  const equation = await page.$eval('#residual-equation', (e) => ({ text: e.textContent, ...e.dataset }));
  const expected = answer.stacks[0];
  assert.ok(Math.abs(Number(equation.withFactor) - expected.expected_with_residual[1] / expected.expected_with_residual[0]) < 1e-12);
  assert.ok(Math.abs(Number(equation.withoutFactor) - expected.expected_without_residual[1] / expected.expected_without_residual[0]) < 1e-12);
  assert.match(equation.text, /√\(1 \+ σ²·d\) = √\(1 \+ 0\.1²·8\) = 1\.04 .*σ·√d = 0\.1·√8 = 0\.283/);
  // The sentence is computed from the bars: bottom / top.
  const six = answer.stacks[0];
  assert.ok(Math.abs(Number(await page.$eval('#residual-readout', (e) => e.dataset.ratio)) - six.with_residual[6] / answer.top_norm) < 1e-12);

  await changed('residuals', () => page.getByLabel('Without residuals').check());
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[0].without_residual].reverse(), 'without, 6 layers');
  assert.match(await text('#residual-readout'), /8\.62e-04/);
  // The toggle changes which series is highlighted, never the data drawn or the axis.
  assert.deepEqual(await chartSeries('residual-chart'), both);
  assert.equal(await page.$eval('#residual-chart', (c) => c.dataset.scale), 'log');
  assert.deepEqual(await page.$$eval('#residual-chart text.tick', (ts) => ts.map((t) => t.textContent)), ticksWith);

  await changed('residuals', () => page.locator('#residual-layers').fill('24'));
  sameNumbers(await barValues('residual-chart'), [...answer.stacks[1].without_residual].reverse(), 'without, 24 layers');
  assert.match(await text('#residual-readout'), /6\.86e-14/);
  // 13 decades: a log axis over whole decades, every bar above its baseline.
  assert.equal(await page.$eval('#residual-chart', (c) => c.dataset.scale), 'log');
  assert.match(await page.$eval('#residual-chart text.axis-title', (t) => t.textContent), /log scale/);
  // The smallest sizes, under 10⁻¹² of the largest, are marked as zero for all practical purposes.
  both = await chartSeries('residual-chart');
  const largest = Math.max(...both.flatMap((s) => s.values));
  const negligible = both[1].values.map((v, i) => (v < 1e-12 * largest ? i : -1)).filter((i) => i >= 0);
  assert.ok(negligible.length > 0 && negligible[0] === 0, `negligible bars ${negligible}`);
  const notes = await page.$$eval('#residual-chart text.zero-note', (all) => all.map((n) => ({ series: n.dataset.series, start: Number(n.dataset.start), end: Number(n.dataset.end), text: n.firstChild.textContent })));
  assert.deepEqual(notes.map(({ series, start, end }) => [series, start, end]), [['1', 0, negligible.at(-1)]]);
  assert.match(notes[0].text, /^≈ 0 \(< 10⁻[⁰¹²³⁴⁵⁶⁷⁸⁹]+\)$/);

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
  // After training, the held-out sequences: the stream's first three of each line's first seed,
  // the letters A.. for symbols 0.., the answer the task asks, and the model's answer.
  const symbols = 8;  // the lab's default: tokens 8 and 9 are the separator | and the blank _
  const letters = (tokens) => tokens.map((t) => ({ [symbols]: '|', [symbols + 1]: '_' })[t] ?? String.fromCharCode(65 + t)).join(' ');
  const rows = await page.$$eval('#train-examples tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
  const expectedRows = [];
  for (const [name, run] of [['post-norm, 2 blocks', runs.done.runs[0]], ['pre-norm, 2 blocks', runs.done.runs[2]]]) {
    for (const example of run.examples) {
      const asked = example.targets.map((t, i) => [t, example.predicted[i]]).filter(([t]) => t >= 0);
      const input = example.tokens.filter((_, i) => example.targets[i] < 0);
      const right = asked.filter(([t, p]) => t === p).length;
      expectedRows.push([name, letters(input), letters(asked.map(([t]) => t)),
        letters(asked.map(([, p]) => p)), `${right} / ${asked.length}`]);
    }
  }
  assert.equal(expectedRows.length, 6, 'three held-out sequences per line');
  assert.deepEqual(rows, expectedRows);
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
  await page.waitForFunction(() => document.getElementById('map-table').dataset.state === 'done', null, { timeout: 240000 });
  const map = await api('/api/trainability-map', MAP_REQUEST);
  const cells = await page.$$eval('#map-table tbody td', (all) => all.map((td) => ({ loss: Number(td.dataset.loss), trained: Number(td.dataset.trained), text: td.textContent })));
  assert.equal(cells.length, map.cells.length);
  // The table is placement by placement, then depth, lr, schedule: the map's own cell order.
  map.cells.forEach((cell, i) => {
    if (ENGINE === 'wasm') {
      // 300 Adam steps grow the engines' last-bit differences: a run that learned the task ends
      // anywhere below the lab's "trained" line, wherever its last steps took it (0.008 in one
      // engine and 0.07 in the other for one cell, 0.06 and 0.12 for another). Both must agree it
      // learned (the verdicts below), and elsewhere agree on the loss.
      const both = [cells[i].loss, cell.final_loss.median];
      assert.ok(Math.max(...both) < map.params.target_loss || Math.abs(both[0] - both[1]) <= MAP_LOSS_TOLERANCE,
        `cell ${i}: the page's loss ${cells[i].loss}, the API's ${cell.final_loss.median}`);
    } else {
      assert.equal(cells[i].loss, cell.final_loss.median, `cell ${i}`);
    }
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
