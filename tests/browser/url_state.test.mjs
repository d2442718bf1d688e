// The lab page's settings in its address (web/js/url_state.js) and the steps widget's patience
// with a half-typed vector, in a real headless browser. A link with settings must open the page
// with those settings and draw exactly what the API answers for them; moving a control writes it
// into the address; each widget's Reset puts its controls back to the page's defaults and draws
// the API's answer for those. Expected numbers come from the native API at API_URL, never from
// the page's own code. Run like lab.test.mjs (scripts/browser-tests.sh sets LAB_URL).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  LAB_URL, SCREENSHOTS, api, openPage, sameNumbers,
  changed, barValues,
} from './harness.mjs';
import { join } from 'node:path';

let browser;
let page;
let pageErrors = [];

// The settings of the link under test: widget 1 at 24 layers without residuals and σ_W 0.2, and
// widget 3 on its own vector with RMSNorm; the fragment (a jump to widget 3) must survive.
const LINK = '?residual-layers=24&residual-mode=without&residual-std=0.2&steps-x=1,2,3,5&steps-norm=rms_norm#steps';

// The page's address, as settings: Map key (a control's id or group name) -> value.
async function addressSettings() {
  const search = await page.evaluate(() => location.search);
  return new Map(new URLSearchParams(search));
}

before(async () => {
  let ready;
  ({ browser, page, pageErrors, ready } = await openPage(LINK));
  await ready();
});

after(async () => {
  await browser?.close();
});

test('a link with settings opens the widgets with them and draws the API\'s answer for them', async () => {
  assert.equal(await page.inputValue('#residual-layers'), '24');
  assert.equal(await page.inputValue('#residual-std'), '0.2');
  assert.equal(await page.isChecked('#residuals input[value=without]'), true);
  assert.equal(await page.textContent('#residual-layers-value'), '24');
  const residuals = await api('/api/gradient-flow', { depths: [6, 24], weight_std: 0.2, spread_seeds: 0 });
  const stack = residuals.stacks.find((s) => s.depth === 24);
  sameNumbers(await barValues('residual-chart'), [...stack.without_residual].reverse(), 'without residuals, 24 layers, σ_W 0.2');
  // The first answer drawn was already the link's: one update, not a default view redrawn.
  assert.equal(await page.$eval('#residuals', (s) => s.dataset.updates), '1');

  assert.equal(await page.inputValue('#steps-x'), '1,2,3,5');
  assert.equal(await page.isChecked('#steps input[value=rms_norm]'), true);
  const steps = await api('/api/norm-steps', { x: [1, 2, 3, 5], gamma: [2], beta: [0.5], norm: 'rms_norm', eps: 0 });
  await page.locator('#steps').getByRole('tab').nth(3).click();
  sameNumbers(await barValues('steps-chart'), steps.steps[3].values, 'RMSNorm of [1, 2, 3, 5], step 4');
  await page.locator('#steps').getByRole('tab').nth(0).click();

  // The fragment stays, and the address keeps the settings (now in the page's own spelling).
  assert.equal(await page.evaluate(() => location.hash), '#steps');
  assert.deepEqual(pageErrors, []);
});

test('moving a control writes it into the address; a setting back at its default leaves it', async () => {
  await changed('residuals', () => page.locator('#residual-layers').fill('12'));
  await page.waitForFunction(() => new URLSearchParams(location.search).get('residual-layers') === '12');
  await changed('normalization', () => page.locator('#normalization').getByLabel('RMSNorm', { exact: true }).check());
  await page.waitForFunction(() => new URLSearchParams(location.search).get('growth-mode') === 'rms_norm');
  await changed('normalization', () => page.locator('#normalization').getByLabel('No normalization').check());
  await page.waitForFunction(() => !new URLSearchParams(location.search).has('growth-mode'));
  const settings = await addressSettings();
  assert.equal(settings.get('residual-mode'), 'without');
  assert.equal(settings.get('steps-x'), '1,2,3,5');

  // The address reproduces the view: a second tab opened on it shows the same settings.
  const other = await page.context().newPage();
  await other.goto(await page.evaluate(() => location.href));
  await other.waitForSelector('body[data-ready=true]', { timeout: 30000 });
  assert.equal(await other.inputValue('#residual-layers'), '12');
  assert.equal(await other.inputValue('#residual-std'), '0.2');
  assert.equal(await other.isChecked('#residuals input[value=without]'), true);
  await other.close();
});

test('check boxes, selects and a single box from the address; values a control cannot take are ignored', async () => {
  const other = await page.context().newPage();
  await other.goto(new URL('?train-placement=pre_norm,admin&train-warmup=1&train-lr=0.003&train-depth=12' +
    '&train-task=nonsense&depth-seeds=3', LAB_URL).href);
  await other.waitForSelector('body[data-ready=true]', { timeout: 30000 });
  assert.deepEqual(await other.$$eval('input[name=train-placement]:checked', (all) => all.map((c) => c.value)), ['pre_norm', 'admin']);
  assert.equal(await other.isChecked('#train-warmup'), true);
  assert.equal(await other.inputValue('#train-lr'), '0.003');
  assert.equal(await other.inputValue('#train-depth'), '12');
  assert.equal(await other.textContent('#train-depth-value'), '12');
  assert.equal(await other.inputValue('#train-task'), 'reverse');  // no such task: the default stays
  assert.equal(await other.inputValue('#depth-seeds'), '3');
  // Reset puts all of widget 5's settings back.
  await other.getByRole('button', { name: 'Reset Deep stacks' }).click();
  assert.deepEqual(await other.$$eval('input[name=train-placement]:checked', (all) => all.map((c) => c.value)), ['post_norm', 'pre_norm']);
  assert.equal(await other.isChecked('#train-warmup'), false);
  assert.equal(await other.inputValue('#train-lr'), '0.001');
  assert.equal(await other.inputValue('#train-depth'), '6');
  assert.equal(await other.textContent('#train-depth-value'), '6');
  await other.waitForFunction(() => [...new URLSearchParams(location.search).keys()].join() === 'depth-seeds');
  await other.close();
});

test('Reset puts a widget back to the page\'s defaults and draws the API\'s answer for them', async () => {
  const names = await page.$$eval('button.reset-widget', (all) => all.map((b) => b.getAttribute('aria-label')));
  assert.equal(new Set(names).size, names.length, `Reset buttons share a name: ${names}`);
  for (const name of ['Reset Residuals', 'Reset Normalization steps', 'Reset Deep stacks']) {
    assert.ok(names.includes(name), `no "${name}" among ${names}`);
  }

  await changed('residuals', () => page.getByRole('button', { name: 'Reset Residuals' }).click());
  assert.equal(await page.inputValue('#residual-layers'), '6');
  assert.equal(await page.inputValue('#residual-std'), '0.1');
  assert.equal(await page.isChecked('#residuals input[value=with]'), true);
  assert.equal(await page.textContent('#residual-layers-value'), '6');
  const residuals = await api('/api/gradient-flow', { depths: [6, 24], weight_std: 0.1, spread_seeds: 0 });
  sameNumbers(await barValues('residual-chart'), [...residuals.stacks[0].with_residual].reverse(), 'defaults: with residuals, 6 layers');
  await page.waitForFunction(() => ![...new URLSearchParams(location.search).keys()].some((k) => k.startsWith('residual-')));

  await changed('steps', () => page.getByRole('button', { name: 'Reset Normalization steps' }).click());
  assert.equal(await page.inputValue('#steps-x'), '2, -3, 1, 4');
  assert.equal(await page.isChecked('#steps input[value=layer_norm]'), true);
  const steps = await api('/api/norm-steps', { x: [2, -3, 1, 4], gamma: [2], beta: [0.5], norm: 'layer_norm', eps: 0 });
  await page.locator('#steps').getByRole('tab').nth(3).click();
  sameNumbers(await barValues('steps-chart'), steps.steps[3].values, 'defaults: the page\'s vector, step 4');
  await page.waitForFunction(() => new URLSearchParams(location.search).toString() === '');
  await page.locator('#steps').screenshot({ path: join(SCREENSHOTS, 'url-state-steps.png') });
});

test('3 Normalization steps: a half-typed vector shows no error while typing, then draws when it parses', async () => {
  const tabs = page.locator('#steps').getByRole('tab');
  await tabs.nth(3).click();
  await changed('steps', () => page.locator('#steps-x').fill('4'));
  const four = await api('/api/norm-steps', { x: [4], gamma: [2], beta: [0.5], norm: 'layer_norm', eps: 0 });
  sameNumbers(await barValues('steps-chart'), four.steps[3].values, '[4], step 4');
  await page.locator('#steps-x').press('End');
  // Typing ", -" ends on a token that is not a number yet: no error while typing, and the last
  // answer stays drawn.
  await page.keyboard.type(', -', { delay: 60 });
  assert.equal(await page.isHidden('#steps-error'), true, 'an error was shown while typing');
  assert.equal(await page.getAttribute('#steps-x', 'aria-invalid'), null);
  sameNumbers(await barValues('steps-chart'), four.steps[3].values, '"4, -" while typing, step 4');

  await changed('steps', () => page.keyboard.type('2'));
  const answer = await api('/api/norm-steps', { x: [4, -2], gamma: [2], beta: [0.5], norm: 'layer_norm', eps: 0 });
  sameNumbers(await barValues('steps-chart'), answer.steps[3].values, '[4, -2], step 4');
  assert.equal(await page.isHidden('#steps-error'), true);

  // Left with a half-typed value, the field names the problem.
  await page.keyboard.type(', 1e');
  await page.locator('#steps-eps').focus();
  await page.waitForSelector('#steps-error:not([hidden])');
  assert.match(await page.textContent('#steps-error'), /^x: /);
  assert.equal(await page.getAttribute('#steps-x', 'aria-invalid'), 'true');
});

test('3 Normalization steps: ε = 0 on a constant vector gives zeros, and the page says why', async () => {
  await changed('steps', () => page.locator('#steps-x').fill('3, 3, 3, 3'));
  await page.locator('#steps').getByRole('tab').nth(2).click();
  const answer = await api('/api/norm-steps', { x: [3, 3, 3, 3], gamma: [2], beta: [0.5], norm: 'layer_norm', eps: 0 });
  assert.equal(answer.op_divisor, 0);
  sameNumbers(await barValues('steps-chart'), answer.steps[2].values, 'normalised constant vector');
  assert.deepEqual(answer.steps[2].values, [0, 0, 0, 0]);
  const note = await page.textContent('#steps-note');
  assert.match(note, /variance σ² is 0/);
  assert.match(note, /0 \/ 0/);
  await changed('steps', () => page.getByRole('button', { name: 'Reset Normalization steps' }).click());
  assert.doesNotMatch(await page.textContent('#steps-note'), /Why zeros/);
  assert.deepEqual(pageErrors, []);
});
