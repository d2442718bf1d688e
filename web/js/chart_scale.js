// Axis scales for the lab's charts: which scale the data calls for, where the ticks go, and how a
// value maps to a position. Kept apart from the drawing so the choice is stated once and tested.
//
// The rules, so that a chart cannot mislead:
//  - Never a silent scale. Every y axis names its scale ('linear scale' or 'log scale') next to its
//    title, whether the widget fixed it or 'auto' chose it (chart.js draws that note always).
//  - Never a flip as a control moves. A chart that is drawn again when a slider or toggle changes
//    must not jump between linear and log: either fix the scale ('log' where the data can span
//    decades, 'linear' where it cannot), or pass `range` to scaleFor (spec.y.range in chart.js):
//    values spanning the widest data the controls can produce, so that 'auto' decides from them
//    and decides the same way at every setting. 'auto' from the drawn data alone is for charts
//    whose data no control changes.
//  - Bars start at zero on a linear axis (a bar's length is its value), and an axis ends at most
//    one tick step past the data (no empty half-chart); a lines chart's x axis ends at its first
//    and last points.
//  - A value under NEGLIGIBLE times the largest in a chart is zero for all practical purposes: the
//    chart says so (zeroNote), rather than leaving a bar on a log axis that looks like any other.

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
// there are many. The top ends at the decade above the data; when ticks every few decades do not
// divide the span, the baseline goes down to the next tick instead (below the data, where the
// bars start, rather than empty decades above it).
export function logScale(low, high, count = 6) {
  let lo = Math.floor(Math.log10(low) + 1e-9);
  let hi = Math.ceil(Math.log10(high) - 1e-9);
  if (hi <= lo) hi = lo + 1;
  const every = Math.max(1, Math.ceil((hi - lo) / count));
  lo = hi - every * Math.ceil((hi - lo) / every);
  const ticks = [];
  for (let k = lo; k <= hi; k += every) ticks.push(10 ** k);
  return {
    kind: 'log', min: 10 ** lo, max: 10 ** hi, ticks, baseline: 10 ** lo,
    fraction: (v) => (v > 0 ? (Math.log10(v) - lo) / (hi - lo) : 0),
  };
}

// The scale for `values` (plus anything else the axis must show, such as a reference line):
// `kind` 'auto' lets the data's span decide, or, when `range` is given, the span of `range`
// together with the data: the widest data the chart's controls can produce, so that the choice
// does not change as they move (see the rules above).
export function scaleFor(values, kind = 'auto', { range } = {}) {
  const finite = values.filter((v) => Number.isFinite(v));
  const chosen = kind === 'auto' ? chooseScale(range ? [...finite, ...range] : finite) : kind;
  if (chosen === 'log') {
    const positive = finite.filter((v) => v > 0);
    if (positive.length) return logScale(Math.min(...positive), Math.max(...positive));
  }
  if (!finite.length) return linearScale(0, 1);
  return linearScale(Math.min(...finite), Math.max(...finite));
}

// Below this fraction of the largest value in a chart, a value is zero for all practical purposes.
export const NEGLIGIBLE = 1e-12;

const SUPERSCRIPT = { '-': '⁻', 0: '⁰', 1: '¹', 2: '²', 3: '³', 4: '⁴', 5: '⁵', 6: '⁶', 7: '⁷', 8: '⁸', 9: '⁹' };

// 10 to a whole power, as printed: 10⁻¹⁴.
export function powerText(power) {
  return `10${String(power).split('').map((c) => SUPERSCRIPT[c]).join('')}`;
}

// The label for a value that is zero for all practical purposes, or null: '≈ 0 (10⁻¹⁴)' for
// 6.86e-14 when the chart's largest value is 3.31 (10⁻¹⁴: the value's order of magnitude).
export function zeroNote(value, largest) {
  if (!Number.isFinite(value) || !(largest > 0)) return null;
  const size = Math.abs(value);
  if (size === 0 || size >= NEGLIGIBLE * largest) return null;
  return `≈ 0 (${powerText(Math.floor(Math.log10(size) + 1e-9))})`;
}

// Runs of neighbouring negligible values, each to be labelled once: [{ start, end, label }], end
// inclusive. A run of one value says its order of magnitude; a longer one a bound for all of it.
export function negligibleRuns(values, largest) {
  const runs = [];
  values.forEach((value, i) => {
    if (zeroNote(value, largest) === null) return;
    const last = runs.at(-1);
    if (last && last.end === i - 1) last.end = i;
    else runs.push({ start: i, end: i });
  });
  for (const run of runs) {
    if (run.start === run.end) {
      run.label = zeroNote(values[run.start], largest);
    } else {
      const biggest = Math.max(...values.slice(run.start, run.end + 1).map(Math.abs));
      run.label = `≈ 0 (< ${powerText(Math.ceil(Math.log10(biggest) - 1e-9))})`;
    }
  }
  return runs;
}
