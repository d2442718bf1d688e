// The lab's charts, drawn by hand in SVG: bars (grouped by category, every series on one shared
// axis) or lines (over a numeric x), with axes, ticks, a stated scale (chart_scale.js picks linear
// or log from the data's span), a legend when there are several series, optional seed-spread
// bands and dashed reference lines, and the exact value of every point in a tooltip. The chart is
// one tab stop: the arrow keys walk its points, Home and End jump to the ends.
//
//   drawChart(container, {
//     kind: 'bars' | 'lines',
//     label: 'what the chart shows',                    // its accessible name
//     x: { label, categories } (bars) | { label, values, scale: 'linear' | 'log' } (lines),
//     y: { label, scale: 'auto' | 'linear' | 'log', format: (v) => text, include: [values],
//          range: [values] },  // range: the widest data the controls can produce ('auto' decides
//                              // from it, so the scale does not flip as they move: chart_scale.js)
//     series: [{ name, values, low?, high?, reference?, muted? }],  // low/high: a band (seed
//                              // spread); muted: drawn paler, behind the others (bars)
//     describe: (series, index) => text,                 // the tooltip; has a default
//     height: px,
//   });
//
// Bars are <rect class="bar" data-value> (a muted series' <rect class="bar-muted">), lines
// <polyline data-series data-points>, so tests read back exactly what was drawn. A bar under
// 10⁻¹² of the chart's largest value gets a note "≈ 0 (10⁻¹⁴)" (<text class="zero-note">). The
// chart redraws itself when its width changes.
import { scaleFor, linearScale, logScale, negligibleRuns, powerText, NEGLIGIBLE } from './chart_scale.js';
import { num, compact } from './format.js';

const SVG = 'http://www.w3.org/2000/svg';
const FONT_PX = 11;
const CHAR_PX = 6.6;  // the width of a digit at FONT_PX, for laying out tick labels
const TITLE_CHAR_PX = 6.4;  // an average character of an axis title (11.5 px, mostly lower case)

function svg(tag, attributes = {}, text) {
  const element = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  if (text !== undefined) element.textContent = text;
  return element;
}

// Tick text: 10⁻³ on a log scale; on a linear one at most three significant digits, 1e-7 beyond
// 10⁴ either way (format.js's compact), never float noise such as 0.30000000000000004.
export function tickText(value, scale) {
  if (scale.kind === 'log') {
    const power = Math.round(Math.log10(value));
    if (power >= 0 && power <= 3) return String(10 ** power);
    return powerText(power);
  }
  return compact(value);
}

function scaleName(scale) {
  return scale.kind === 'log' ? 'log scale' : 'linear scale';
}

// Places x-axis labels left to right: each kept inside the plot's width and dropped when it
// would run into the one before, so labels never overlap whatever the width.
function xLabeller(root, left, right, y) {
  let lastRight = -Infinity;
  return (centre, text) => {
    const half = (String(text).length * CHAR_PX) / 2;
    const x = Math.max(left + half, Math.min(right - half, centre));
    if (x - half < lastRight + 6) return;
    lastRight = x + half;
    root.append(svg('text', { class: 'tick', x, y, 'text-anchor': 'middle' }, String(text)));
  };
}

const observer = typeof ResizeObserver === 'undefined' ? null : new ResizeObserver((entries) => {
  for (const entry of entries) {
    const container = entry.target;
    const width = Math.round(entry.contentRect.width);
    if (container.chartSpec && width && width !== container.chartWidth) render(container);
  }
});

export function drawChart(container, spec) {
  container.chartSpec = spec;
  container.classList.add('chart');
  if (!container.chartReady) {
    container.chartReady = true;
    container.tabIndex = 0;
    container.setAttribute('role', 'group');
    container.addEventListener('keydown', onKey);
    container.addEventListener('blur', () => hideTip(container));
    observer?.observe(container);
  }
  render(container);
}

function defaultDescribe(spec, format) {
  return (series, index) => {
    const at = spec.kind === 'bars' ? spec.x.categories[index] : spec.x.values[index];
    const one = (s) => {
      const value = spec.series[s].values[index];
      if (!Number.isFinite(value)) return `${spec.series[s].name}: —`;  // not yet run, or diverged
      let text = `${spec.series[s].name}: ${format(value)}`;
      if (spec.series[s].low) {
        text += ` (seeds ${format(spec.series[s].low[index])} to ${format(spec.series[s].high[index])})`;
      }
      return text;
    };
    const which = series >= 0 ? [series] : spec.series.map((_, s) => s);
    return `${spec.x.label} ${at}: ${which.map(one).join('; ')}`;
  };
}

function render(container) {
  const spec = container.chartSpec;
  const width = Math.max(200, Math.round(container.clientWidth || 600));
  container.chartWidth = width;
  let height = spec.height || (width < 500 ? 190 : 230);
  const format = spec.y.format || ((v) => num(v, 4));
  const describe = spec.describe || defaultDescribe(spec, format);

  // The y scale covers every value, band and reference the chart shows.
  const everything = [...(spec.y.include || []),
    ...spec.series.flatMap((s) => [...s.values, ...(s.low || []), ...(s.high || [])])];
  const y = scaleFor(everything, spec.y.scale || 'auto', { range: spec.y.range });
  container.dataset.scale = y.kind;
  container.setAttribute('aria-label', `${spec.label} (y axis: ${scaleName(y)}). Use the arrow keys to read each value.`);
  // What is drawn, exactly, for anyone who reads the page's data (the tests do).
  container.dataset.series = JSON.stringify(spec.series.map(({ name, values, low, high }) => ({ name, values, low, high })));
  const tickLabels = y.ticks.map((t) => tickText(t, y));
  const left = 8 + Math.max(...tickLabels.map((t) => t.length)) * CHAR_PX + 6;
  const pad = { left, right: 12, top: 24, bottom: 38 };
  // The y axis's name and its scale, above it (rotated text would not fit a phone's chart), on one
  // line when they fit the width, else the scale on a line of its own: it is never cut off.
  const yTitle = `↑ ${spec.y.label} (${scaleName(y)})`;
  const titleLines = yTitle.length * TITLE_CHAR_PX <= width ? [yTitle] : [`↑ ${spec.y.label}`, `(${scaleName(y)})`];
  pad.top += (titleLines.length - 1) * (FONT_PX + 3);
  height += (titleLines.length - 1) * (FONT_PX + 3);
  const plotW = width - pad.left - pad.right;
  const plotH = height - pad.top - pad.bottom;
  const yPos = (v) => pad.top + (1 - Math.max(0, Math.min(1, y.fraction(v)))) * plotH;

  const root = svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, 'aria-hidden': 'true' });
  // y axis: grid lines, ticks, the stated scale.
  y.ticks.forEach((tick, i) => {
    const at = yPos(tick);
    root.append(svg('line', { class: tick === y.baseline ? 'baseline' : 'grid', x1: pad.left, x2: width - pad.right, y1: at, y2: at }));
    root.append(svg('text', { class: 'tick', x: pad.left - 5, y: at + 4, 'text-anchor': 'end' }, tickLabels[i]));
  });
  titleLines.forEach((line, i) => {
    root.append(svg('text', { class: 'axis-title', x: 0, y: FONT_PX + 1 + i * (FONT_PX + 3) }, line));
  });
  root.append(svg('line', { class: 'axis', x1: pad.left, x2: pad.left, y1: pad.top, y2: pad.top + plotH }));
  root.append(svg('text', { class: 'axis-title', x: pad.left + plotW / 2, y: height - 4, 'text-anchor': 'middle' }, spec.x.label));

  const marks = []; // per point: its x centre, for the tooltip and the cursor
  if (spec.kind === 'bars') {
    const categories = spec.x.categories;
    const slot = plotW / Math.max(1, categories.length);
    const gap = Math.min(4, slot * 0.2);
    const barW = Math.max(1, (slot - gap) / spec.series.length);
    const labelW = Math.max(...categories.map((c) => String(c).length)) * CHAR_PX + 6;
    const every = Math.max(1, Math.ceil(labelW / slot));
    const base = yPos(y.kind === 'log' ? y.baseline : 0);
    const label = xLabeller(root, pad.left - 2, width - 2, pad.top + plotH + 14);
    categories.forEach((category, index) => {
      const x0 = pad.left + index * slot + gap / 2;
      spec.series.forEach((series, s) => {
        const v = series.values[index];
        const top = Number.isFinite(v) && (y.kind !== 'log' || v > 0) ? yPos(v) : base;
        const rect = svg('rect', {
          class: `${series.muted ? 'bar-muted' : 'bar'} s${s}`, x: x0 + s * barW, width: Math.max(0.5, barW - (spec.series.length > 1 ? 0.5 : 0)),
          y: Math.min(top, base), height: Math.abs(base - top),
        });
        rect.dataset.value = String(v);
        rect.dataset.series = String(s);
        rect.dataset.index = String(index);
        root.append(rect);
        marks.push({ x: x0 + (s + 0.5) * barW, series: s, index, rect });
      });
      if (index % every === 0) label(x0 + (slot - gap) / 2, category);
    });
    // Bars that are zero for all practical purposes say so, once per run of neighbours, above the
    // run (a note that would run into another is left out; every bar's tooltip has its value).
    const largest = Math.max(0, ...everything.filter(Number.isFinite).map(Math.abs));
    const noted = [];
    spec.series.forEach((series, s) => {
      for (const run of negligibleRuns(series.values, largest)) {
        const from = pad.left + run.start * slot + gap / 2 + s * barW;
        const to = pad.left + run.end * slot + gap / 2 + (s + 1) * barW;
        const tops = series.values.slice(run.start, run.end + 1)
          .map((v) => (y.kind === 'log' && v > 0 ? yPos(v) : base));
        const half = (run.label.length * CHAR_PX) / 2;
        const x = Math.max(pad.left + half, Math.min(width - pad.right - half, (from + to) / 2));
        const at = Math.max(pad.top + FONT_PX, Math.min(...tops) - 4);
        if (noted.some((box) => Math.abs(box.x - x) < box.half + half + 4 && Math.abs(box.at - at) < FONT_PX + 2)) continue;
        noted.push({ x, at, half });
        const note = svg('text', { class: 'zero-note', x, y: at, 'text-anchor': 'middle' }, run.label);
        note.append(svg('title', {}, `${series.name}: under ${powerText(Math.log10(NEGLIGIBLE))} of the chart's ` +
          `largest value (${format(largest)}), zero for all practical purposes`));
        note.dataset.series = String(s);
        note.dataset.start = String(run.start);
        note.dataset.end = String(run.end);
        root.append(note);
      }
    });
  } else {
    const xs = spec.x.values;
    const xScale = spec.x.scale === 'log'
      ? logScale(Math.min(...xs), Math.max(...xs))
      : linearScale(Math.min(...xs), Math.max(...xs), Math.max(2, Math.floor(plotW / 70)), { zero: false });
    // The x axis runs from the first point to the last, not to the next round number.
    const xLo = Math.min(...xs);
    const xHi = Math.max(...xs);
    const xFraction = (v) => (spec.x.scale === 'log'
      ? (Math.log(v) - Math.log(xLo)) / Math.max(1e-12, Math.log(xHi) - Math.log(xLo))
      : (v - xLo) / Math.max(1e-12, xHi - xLo));
    const xPos = (v) => pad.left + xFraction(v) * plotW;
    // x ticks: the data's own x values when few (depths), round numbers otherwise (steps).
    const xTicks = xs.length <= 10 ? xs : xScale.ticks.filter((t) => t >= xLo && t <= xHi);
    const label = xLabeller(root, pad.left - 2, width - 2, pad.top + plotH + 16);
    for (const tick of xTicks) {
      root.append(svg('line', { class: 'axis', x1: xPos(tick), x2: xPos(tick), y1: pad.top + plotH, y2: pad.top + plotH + 4 }));
      label(xPos(tick), tickText(tick, { kind: 'linear' }));
    }
    spec.series.forEach((series, s) => {
      if (series.low && series.high) {
        const upper = [];
        const lower = [];
        xs.forEach((x, i) => {
          if (Number.isFinite(series.low[i]) && Number.isFinite(series.high[i])) {
            upper.push(`${xPos(x).toFixed(1)},${yPos(series.high[i]).toFixed(1)}`);
            lower.unshift(`${xPos(x).toFixed(1)},${yPos(series.low[i]).toFixed(1)}`);
          }
        });
        if (upper.length) root.append(svg('polygon', { class: `band s${s}`, points: [...upper, ...lower].join(' ') }));
      }
      const line = [];
      series.values.forEach((v, i) => {
        if (Number.isFinite(v) && (y.kind !== 'log' || v > 0)) line.push(`${xPos(xs[i]).toFixed(1)},${yPos(v).toFixed(1)}`);
      });
      const polyline = svg('polyline', { class: `line s${s}${series.reference ? ' reference' : ''}`, points: line.join(' ') });
      polyline.dataset.series = String(s);
      polyline.dataset.points = String(line.length);
      root.append(polyline);
      if (xs.length <= 16) {
        series.values.forEach((v, i) => {
          if (Number.isFinite(v) && !series.reference) root.append(svg('circle', { class: `dot s${s}`, cx: xPos(xs[i]), cy: yPos(v), r: 3 }));
        });
      }
    });
    xs.forEach((x, index) => marks.push({ x: xPos(x), series: -1, index }));
  }
  root.append(svg('line', { class: 'baseline', x1: pad.left, x2: width - pad.right, y1: pad.top + plotH, y2: pad.top + plotH }));
  const cursor = svg('line', { class: 'cursor', y1: pad.top, y2: pad.top + plotH, x1: 0, x2: 0, visibility: 'hidden' });
  root.append(cursor);

  const children = [root];
  if (spec.series.length > 1 || spec.legend) {
    const legend = document.createElement('ul');
    legend.className = 'legend';
    spec.series.forEach((series, s) => {
      const item = document.createElement('li');
      const swatch = document.createElement('span');
      swatch.className = `swatch s${s}${series.reference ? ' reference' : ''}${series.muted ? ' muted' : ''}`;
      item.append(swatch, series.name + (series.low ? ' (band: seed spread)' : ''));
      legend.append(item);
    });
    children.push(legend);
  }
  const tip = document.createElement('div');
  tip.className = 'tip';
  tip.hidden = true;
  tip.setAttribute('aria-live', 'polite');
  children.push(tip);
  container.replaceChildren(...children);

  container.chartState = { marks, describe, tip, cursor, active: -1 };
  root.addEventListener('mousemove', (event) => {
    const box = root.getBoundingClientRect();
    const at = event.clientX - box.left;
    let best = 0;
    marks.forEach((mark, i) => { if (Math.abs(mark.x - at) < Math.abs(marks[best].x - at)) best = i; });
    if (marks.length) show(container, best);
  });
  root.addEventListener('mouseleave', () => hideTip(container));
}

function show(container, position) {
  const state = container.chartState;
  const mark = state.marks[position];
  if (!mark) return;
  state.marks[state.active]?.rect?.classList.remove('active');
  state.active = position;
  mark.rect?.classList.add('active');
  state.cursor.setAttribute('x1', mark.x);
  state.cursor.setAttribute('x2', mark.x);
  state.cursor.setAttribute('visibility', 'visible');
  state.tip.textContent = state.describe(mark.series, mark.index);
  state.tip.hidden = false;
}

function hideTip(container) {
  const state = container.chartState;
  if (!state) return;
  state.tip.hidden = true;
  state.marks[state.active]?.rect?.classList.remove('active');
  state.cursor.setAttribute('visibility', 'hidden');
}

function onKey(event) {
  const container = event.currentTarget;
  const state = container.chartState;
  if (!state || !state.marks.length) return;
  const last = state.marks.length - 1;
  const moves = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1 };
  if (event.key in moves) show(container, Math.max(0, Math.min(last, state.active < 0 ? 0 : state.active + moves[event.key])));
  else if (event.key === 'Home') show(container, 0);
  else if (event.key === 'End') show(container, last);
  else return;
  event.preventDefault();
}
