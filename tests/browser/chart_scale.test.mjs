// The charts' scale rules (web/js/chart_scale.js), in Node without a browser: which scale a
// data set gets, that the ticks are round and cover the data, and that the baseline is shown.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chooseScale, linearScale, logScale, scaleFor, LOG_SPAN } from '../../web/js/chart_scale.js';

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
