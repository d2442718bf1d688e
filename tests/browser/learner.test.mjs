// The learner's path through the lab page: the block diagram of section 5 redraws its wiring
// when the placement is switched (by mouse and by keyboard), and the "why" sentences under the
// widgets carry numbers computed from the values on the page. Every expected number here is
// computed by the test itself from the settings it chose (1 + σ²·d from the slider's σ and the
// width, √(σ₀² + L·gain²), √(σ²/(σ² + ε)), the per-seed growth of the gradient ratio), or taken
// from the native API at API_URL, never from the page's own code. Run by
// scripts/browser-tests.sh, which starts `addnorm lab` and sets LAB_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  SCREENSHOTS, api, openPage,
  changed, text,
} from './harness.mjs';
import { join } from 'node:path';

let browser;
let page;
let pageErrors = [];

function includes(haystack, needle) {
  assert.ok(haystack.includes(needle), `"${haystack}" lacks "${needle}"`);
}

// Three decimals between 0.01 and 1e5, else NumPy's %.2e (two-digit exponent).
function threeDecimals(v) {
  if (v >= 0.01 && v < 1e5) return v.toFixed(3);
  const [mantissa, exponent] = v.toExponential(2).split('e');
  return `${mantissa}e${exponent[0]}${exponent.slice(1).padStart(2, '0')}`;
}

before(async () => {
  let ready;
  ({ browser, page, pageErrors, ready } = await openPage());
  await ready();
});

after(async () => {
  await browser?.close();
});

// Where the diagram drew its boxes: the vertical centre of the norm box, the sub-layer box and
// the add (SVG y grows downwards, and the block is drawn bottom to top).
async function diagramLayout() {
  return page.$eval('#block-diagram', (svg) => {
    const middle = (selector) => {
      const shape = svg.querySelector(selector);
      const box = shape.getBBox();
      return box.y + box.height / 2;
    };
    return {
      norm: middle('rect.norm'),
      sublayer: middle('rect.sublayer'),
      add: middle('circle.add'),
      frames: svg.querySelectorAll('.addnorm-frame').length,
      role: svg.getAttribute('role'),
      label: svg.getAttribute('aria-label'),
      title: svg.querySelector('title')?.textContent,
    };
  });
}

test('5 the block diagram switches between post-norm and pre-norm wiring, by mouse and keyboard', async () => {
  const radios = page.getByRole('group', { name: 'Wiring drawn' });
  assert.equal(await radios.getByRole('radio').count(), 2);
  let drawn = await diagramLayout();
  // Post-norm: F, then the add, then the norm above it, inside one Add & Norm frame.
  assert.equal(drawn.role, 'img');
  includes(drawn.label, 'Norm(x + F(x))');
  includes(drawn.title, 'Norm(x + F(x))');
  assert.ok(drawn.sublayer > drawn.add && drawn.add > drawn.norm, `post-norm order ${JSON.stringify(drawn)}`);
  assert.equal(drawn.frames, 1);

  await page.locator('#block-diagram').scrollIntoViewIfNeeded();
  await radios.getByLabel('Pre-norm').check();
  drawn = await diagramLayout();
  // Pre-norm: the norm first, then F, then the add at the top.
  includes(drawn.label, 'x + F(Norm(x))');
  includes(drawn.title, 'x + F(Norm(x))');
  assert.ok(drawn.norm > drawn.sublayer && drawn.sublayer > drawn.add, `pre-norm order ${JSON.stringify(drawn)}`);
  assert.equal(drawn.frames, 0);
  includes(await text('#block-diagram-formula'), 'x ← x + F(Norm(x))');
  await page.locator('.block-diagram').screenshot({ path: join(SCREENSHOTS, 'block-diagram-pre.png') });

  // The keyboard: an arrow key in the radio group moves back to post-norm.
  await page.locator('#diagram-pre').focus();
  await page.keyboard.press('ArrowLeft');
  assert.equal(await page.locator('#diagram-post').isChecked(), true);
  drawn = await diagramLayout();
  includes(drawn.label, 'Norm(x + F(x))');
  assert.ok(drawn.sublayer > drawn.add && drawn.add > drawn.norm);
  assert.deepEqual(pageErrors, []);
});

test('1 the residual sentence: 1 + σ²·d per layer from the slider\'s σ and the width', async () => {
  const width = 8;
  await changed('residuals', () => page.locator('#residual-std').fill('0.2'));
  await changed('residuals', () => page.locator('#residual-layers').fill('10'));
  const answer = await api('/api/gradient-flow', { depths: [6, 24, 10], weight_std: 0.2, spread_seeds: 0 });
  assert.equal(answer.params.width, width);
  const stack = answer.stacks.find((s) => s.depth === 10);

  const factor = 1 + 0.2 * 0.2 * width;  // 1.32
  let why = await text('#residual-why');
  includes(why, `1 + σ²·d = 1 + 0.20²·${width} = ${factor.toFixed(4)} per layer`);
  includes(why, `√${factor.toFixed(4)} = ${Math.sqrt(factor).toFixed(4)}`);
  includes(why, `Over 10 layers that predicts ×${threeDecimals(factor ** 5)}`);
  includes(why, `gave ×${threeDecimals(stack.with_residual[10] / answer.top_norm)}`);

  await changed('residuals', () => page.getByLabel('Without residuals').check());
  const plain = 0.2 * 0.2 * width;  // 0.32
  why = await text('#residual-why');
  includes(why, `σ²·d = 0.20²·${width} = ${plain.toFixed(4)}`);
  includes(why, `predicts ×${threeDecimals(plain ** 5)}`);
  includes(why, `gave ×${threeDecimals(stack.without_residual[10] / answer.top_norm)}`);
  includes(why, `σ below ${(1 / Math.sqrt(width)).toFixed(3)}`);

  // Back to the page's settings.
  await changed('residuals', () => page.getByLabel('With residuals').check());
  await changed('residuals', () => page.locator('#residual-std').fill('0.1'));
  await changed('residuals', () => page.locator('#residual-layers').fill('6'));
});

test('2 the pre-norm sentence: σ grows like √(σ₀² + L·gain²)', async () => {
  await changed('normalization', () => page.locator('#normalization').getByLabel(/Pre-norm/).check());
  const answer = await api('/api/activation-growth', { layers: 24, gain: 1.4, modes: ['pre_norm'], spread_seeds: 0 });
  const start = answer.curves[0].std[0];
  const expected = Math.sqrt(start * start + 24 * 1.4 * 1.4);
  const why = await text('#growth-why');
  includes(why, 'gain² = 1.40² = 1.9600');
  includes(why, `= ${expected.toFixed(4)}, against ${answer.curves[0].std[24].toFixed(4)} drawn`);
});

test('3 the steps sentences: 2.8534 against the rounded 2.86, and σ just under 1 shown as 1.0000', async () => {
  await changed('steps', () => page.getByRole('button', { name: /Page/ }).click());
  const xHat = 3 / Math.sqrt(6.5);  // (4 − 1) / σ of [2, −3, 1, 4]
  const rounded = Math.round(xHat * 100) / 100;
  let why = await text('#steps-rounding-why');
  includes(why, `2·${rounded} + 0.5 = ${Number((2 * rounded + 0.5).toFixed(3))}`);
  includes(why, `output is ${(2 * xHat + 0.5).toFixed(4)}`);
  includes(why, '2.86');

  await changed('steps', () => page.getByRole('button', { name: /cat/ }).click());
  const variance = 5;  // [2, 4, 6, 8]: mean 5, variance 5
  const eps = 1e-5;
  why = await text('#steps-sigma-why');
  includes(why, `√(${variance}/(${variance} + ${eps})) = ${Math.sqrt(variance / (variance + eps)).toFixed(7)}`);
  includes(why, 'ε/(2σ²) = 1.00e-06');
  await page.getByRole('tab').nth(2).click();
  assert.match(await text('#steps-stats'), /σ = 1\.0000/);
  await changed('steps', () => page.getByRole('button', { name: /Page/ }).click());
});

test('6 the seed-count verdict and the saturated update size, from the API\'s numbers', async () => {
  await page.waitForSelector('#depth-results[data-state=done]', { timeout: 60000 });
  const depths = [2, 4, 8, 16];
  const model = { d_model: 32, n_heads: 4, d_ff: 64, batch: 4, length: 6, task: 'copy', depths, seeds: 1 };
  const find = (answer, placement, depth) => answer.stacks.find((s) => s.placement === placement && s.depth === depth);
  const growths = [];
  for (const seed of [0, 1]) {
    const answer = await api('/api/init-gradients', { ...model, placements: ['post_norm', 'pre_norm'], seed });
    const ratio = depths.map((d) => find(answer, 'post_norm', d).mean_layer_grad_norm / find(answer, 'pre_norm', d).mean_layer_grad_norm);
    growths.push(ratio.at(-1) / ratio[0]);
  }
  const ratioWhy = await text('#ratio-why');
  growths.forEach((g, seed) => includes(ratioWhy, `seed ${seed} ×${g.toFixed(3)}`));
  const verdict = (g) => (g > Math.sqrt(8) ? 'faster' : 'slower');
  if (verdict(growths[0]) !== verdict(growths[1])) includes(ratioWhy, 'the verdict flips');

  // At 1e-5 the change is in the linear regime; at 1e-3 it is saturated.
  await changed('depth-results', () => page.locator('#update-lr').selectOption('0.00001'));
  const placements = ['post_norm', 'pre_norm', 'deep_norm'];
  const post = [];
  for (const seed of [0, 1]) {
    const answer = await api('/api/update-size', { ...model, placements, lrs: [1e-5], seed });
    post.push(find(answer, 'post_norm', 16).output_change);
  }
  const mean = (post[0] + post[1]) / 2;
  assert.ok(mean < 0.1, `post-norm's change at lr 1e-5 is ${mean}`);
  let updateWhy = await text('#update-why');
  includes(updateWhy, 'linear regime');
  includes(updateWhy, `moves by ${mean.toFixed(3)} of its size`);

  await changed('depth-results', () => page.locator('#update-lr').selectOption('0.001'));
  updateWhy = await text('#update-why');
  includes(updateWhy, 'saturates');
  assert.deepEqual(pageErrors, []);
});
