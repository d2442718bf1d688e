// Axis scales for the lab's charts: which scale the data calls for, where the ticks go, and how a
// value maps to a position. Kept apart from the drawing so the choice is stated once and tested.

// Data spanning more than this ratio (largest / smallest, all positive) is drawn on a log scale;
// anything narrower on a linear scale from zero, so a 10% difference looks like 10%.
export const LOG_SPAN = 30;

// 'log' when every value is positive and they span more than LOG_SPAN, else 'linear'.
export function chooseScale(values) {
  const finite = values.filter((v) => Number.isFinite(v));
  if (!finite.length || finite.some((v) => v <= 0)) return 'linear';
  return Math.max(...finite) / Math.min(...finite) > LOG_SPAN ? 'log' : 'linear';
}

// The first of 1, 2, 5 × 10^k at or above `step`.
function niceStep(step) {
  const power = 10 ** Math.floor(Math.log10(step));
  for (const factor of [1, 2, 5, 10]) {
    if (factor * power >= step * (1 - 1e-9)) return factor * power;
  }
  return 10 * power;
}

// A linear scale whose domain holds `low`..`high` and zero (the baseline; `zero: false` leaves it
// out, for an x axis of steps or depths), widened to round ticks: about `count` of them, at
// multiples of 1, 2 or 5 × 10^k.
export function linearScale(low, high, count = 5, { zero = true } = {}) {
  let lo = zero ? Math.min(0, low) : low;
  let hi = zero ? Math.max(0, high) : high;
  if (!(hi > lo)) hi = lo + 1;
  const step = niceStep((hi - lo) / count);
  lo = Math.floor(lo / step + 1e-9) * step;
  hi = Math.ceil(hi / step - 1e-9) * step;
  const ticks = [];
  for (let k = Math.round(lo / step); k <= Math.round(hi / step); k++) ticks.push(k * step);
  return {
    kind: 'linear', min: lo, max: hi, ticks, baseline: 0,
    fraction: (v) => (v - lo) / (hi - lo),
  };
}

// A log scale over whole decades: from the decade at or below the smallest value (the bars'
// baseline) to the one at or above the largest; a tick at every decade, or every few when
// there are many.
export function logScale(low, high, count = 6) {
  let lo = Math.floor(Math.log10(low) + 1e-9);
  let hi = Math.ceil(Math.log10(high) - 1e-9);
  if (hi <= lo) hi = lo + 1;
  const every = Math.max(1, Math.ceil((hi - lo) / count));
  hi = lo + every * Math.ceil((hi - lo) / every);
  const ticks = [];
  for (let k = lo; k <= hi; k += every) ticks.push(10 ** k);
  return {
    kind: 'log', min: 10 ** lo, max: 10 ** hi, ticks, baseline: 10 ** lo,
    fraction: (v) => (v > 0 ? (Math.log10(v) - lo) / (hi - lo) : 0),
  };
}

// The scale for `values` (plus anything else the axis must show, such as a reference line):
// `kind` 'auto' lets the data's span decide.
export function scaleFor(values, kind = 'auto') {
  const finite = values.filter((v) => Number.isFinite(v));
  const chosen = kind === 'auto' ? chooseScale(finite) : kind;
  if (chosen === 'log') {
    const positive = finite.filter((v) => v > 0);
    if (positive.length) return logScale(Math.min(...positive), Math.max(...positive));
  }
  if (!finite.length) return linearScale(0, 1);
  return linearScale(Math.min(...finite), Math.max(...finite));
}
