// The charts' scale rules (web/js/chart_scale.js), in Node without a browser: which scale a
// data set gets, that the ticks are round and cover the data, and that the baseline is shown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseScale, linearScale, logScale, scaleFor, LOG_SPAN, NEGLIGIBLE, zeroNote, negligibleRuns } from '../../web/js/chart_scale.js';
import { compact } from '../../web/js/format.js';
import { tickText } from '../../web/js/chart.js';

test('the span of the data picks the scale', () => {
  assert.equal(chooseScale([2.0, 2.09, 2.33, 2.46]), 'linear');           // gradients with residuals
  assert.equal(chooseScale([2.0, 0.24, 0.044, 0.0097]), 'log');           // without: 206×
  assert.equal(chooseScale([1, LOG_SPAN]), 'linear');                     // exactly the limit
  assert.equal(chooseScale([1, LOG_SPAN * 1.01]), 'log');
  assert.equal(chooseScale([-1e-9, 5, 1e6]), 'linear');                    // a value ≤ 0: no log
  assert.equal(chooseScale([0.5, NaN, Infinity, 1]), 'linear');            // non-finite values are ignored
});

test('a linear scale starts at zero and has round ticks covering the data', () => {
  const scale = linearScale(2.0, 3.31);
  assert.equal(scale.min, 0);
  assert.equal(scale.ticks[0], 0);
  assert.ok(scale.max >= 3.31 && scale.max <= 4, `max ${scale.max}`);
  const step = scale.ticks[1] - scale.ticks[0];
  assert.ok([0.5, 1].includes(Number(step.toPrecision(6))), `step ${step}`);
  assert.equal(scale.fraction(0), 0);
  assert.equal(scale.fraction(scale.max), 1);

  const signed = linearScale(-1.3416, 1.3416);
  assert.ok(signed.min <= -1.3416 && signed.max >= 1.3416);
  assert.ok(signed.ticks.some((t) => Math.abs(t) < 1e-12), 'zero is a tick');

  const steps = linearScale(1, 200, 5, { zero: false });
  assert.ok(steps.min <= 1 && steps.min >= 0 && steps.max === 200, `${steps.min}..${steps.max}`);
});

test('a log scale spans whole decades, its baseline the decade below the smallest value', () => {
  const scale = logScale(6.86e-14, 2.0);
  assert.equal(scale.baseline, scale.min);
  assert.ok(scale.min <= 6.86e-14 && scale.min > 6.86e-15 / 10, `min ${scale.min}`);
  assert.ok(scale.max >= 2 && scale.max <= 100, `max ${scale.max}`);
  assert.ok(scale.ticks.length <= 8, `${scale.ticks.length} ticks`);
  for (const tick of scale.ticks) assert.ok(Math.abs(Math.log10(tick) - Math.round(Math.log10(tick))) < 1e-9);
  assert.ok(Math.abs(scale.fraction(scale.min)) < 1e-12);
  assert.ok(Math.abs(scale.fraction(scale.max) - 1) < 1e-12);
  // Ticks every few decades: the top stays at the decade above the data, the baseline goes lower.
  const deep = logScale(1.24e-30, 7.7);
  assert.equal(deep.max, 10);
  assert.ok(deep.min <= 1.24e-30 && deep.ticks.length <= 8, `${deep.min}, ${deep.ticks.length} ticks`);
  // A decade apart from the baseline is the same height wherever it is.
  const d = scale.fraction(1e-5) - scale.fraction(1e-6);
  assert.ok(Math.abs(d - (scale.fraction(1) - scale.fraction(0.1))) < 1e-12);
});

test('scaleFor covers every value it is given', () => {
  for (const values of [[0.3, 0.5, 0.7], [1e-8, 1e-2, 3], [-2, 5], [4]]) {
    const scale = scaleFor(values);
    for (const v of values) assert.ok(v >= scale.min - 1e-15 && v <= scale.max + 1e-15, `${v} outside ${scale.min}..${scale.max}`);
  }
});

test('tick labels are compact: at most three significant digits, exponent form beyond 10⁴', () => {
  assert.equal(compact(0.30000000000000004), '0.3');
  assert.equal(compact(0.1 + 0.2), '0.3');
  assert.equal(compact(1.0000000000000002e-7), '1e-7');
  assert.equal(compact(2.5e-7), '2.5e-7');
  assert.equal(compact(-0.5), '−0.5');
  assert.equal(compact(0), '0');
  assert.equal(compact(3.31), '3.31');
  assert.equal(compact(1234.5), '1230');
  assert.equal(compact(10000), '10000');
  assert.equal(compact(25000), '2.5e4');
  assert.equal(compact(0.0001), '0.0001');
  assert.equal(compact(0.00005), '5e-5');
  assert.equal(tickText(0.30000000000000004, { kind: 'linear' }), '0.3');
  assert.equal(tickText(1e-14, { kind: 'log' }), '10⁻¹⁴');
  assert.equal(tickText(100, { kind: 'log' }), '100');
  // Every tick of a linear scale over awkward data prints short.
  for (const [low, high] of [[0, 0.7], [0, 3.3e-7], [-1.3416, 1.3416], [0, 123456]]) {
    for (const tick of linearScale(low, high).ticks) {
      const text = tickText(tick, { kind: 'linear' });
      assert.ok(text.replace(/[−.]|e-?\d+$/g, '').replace(/^0+/, '').length <= 3, `${tick} printed as ${text}`);
    }
  }
});

test('a linear axis ends at most one tick step past the data', () => {
  for (const [low, high] of [[2.0, 3.31], [0, 0.7], [0.01, 101], [-5, 0.2], [0, 3.3e-7]]) {
    const scale = linearScale(low, high);
    const step = scale.ticks[1] - scale.ticks[0];
    assert.ok(scale.max >= high && scale.max - high < step, `${low}..${high}: max ${scale.max}, step ${step}`);
    assert.ok(scale.min <= Math.min(0, low) && Math.min(0, low) - scale.min < step, `${low}..${high}: min ${scale.min}`);
  }
});

test("'auto' with the controls' range does not flip between linear and log as they move", () => {
  // Section 1's sizes at a few settings of its sliders: 1 layer spans 3.6×, 6 layers 3,800×.
  const settings = [[2.83, 2.94, 0.8], [2.83, 3.31, 8.62e-4], [2.83, 2.79, 6.86e-14]];
  assert.deepEqual(settings.map((values) => scaleFor(values).kind), ['linear', 'log', 'log'], 'from the data alone it flips');
  const range = settings.flat();
  assert.deepEqual(settings.map((values) => scaleFor(values, 'auto', { range }).kind), ['log', 'log', 'log']);
  // A range that never spans decades keeps every setting linear, and the scale still covers the data.
  const narrow = scaleFor([2, 3.5], 'auto', { range: [1, 4] });
  assert.equal(narrow.kind, 'linear');
  assert.ok(narrow.max >= 3.5);
  // A fixed scale is kept whatever the data.
  assert.equal(scaleFor([2, 3], 'log').kind, 'log');
  assert.equal(scaleFor([1e-9, 3], 'linear').kind, 'linear');
});

test('a value under 10⁻¹² of the largest is noted as zero for all practical purposes', () => {
  assert.equal(NEGLIGIBLE, 1e-12);
  assert.equal(zeroNote(6.86e-14, 2.83), '≈ 0 (10⁻¹⁴)');  // without residuals at 24 layers
  assert.equal(zeroNote(8.62e-4, 3.31), null);            // small, but a real size
  assert.equal(zeroNote(2.9e-12, 2.83), null);            // just above 10⁻¹² × 2.83
  assert.equal(zeroNote(0, 2.83), null);                  // exactly zero needs no "≈"
  assert.equal(zeroNote(NaN, 2.83), null);
  assert.equal(zeroNote(-1e-15, 1), '≈ 0 (10⁻¹⁵)');
  // Neighbours are labelled once per run.
  const runs = negligibleRuns([6.86e-14, 2.4e-13, 7e-13, 0.5, 2.83, 1e-20], 2.83);
  assert.deepEqual(runs, [
    { start: 0, end: 2, label: '≈ 0 (< 10⁻¹²)' },
    { start: 5, end: 5, label: '≈ 0 (10⁻²⁰)' },
  ]);
  assert.deepEqual(negligibleRuns([2.0, 0.24, 0.044], 2.0), []);
});
