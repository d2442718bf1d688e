// Widget 1, Residuals: per-layer gradient sizes through a stack of random linear layers, with and
// without the shortcut (POST /api/gradient-flow). The page's own run draws a 6-layer stack and
// then a 24-layer one from default_rng(42); the slider's stack is drawn after those two, so at 6
// and 24 layers the bars are the page's own stacks and its printed figures.
import { requester, showError, markUpdated } from './api.js';
import { sci, num, compact } from './format.js';
import { drawChart } from './chart.js';
import { zeroNote } from './chart_scale.js';

export function setUpResiduals() {
  const section = document.getElementById('residuals');
  const layers = document.getElementById('residual-layers');
  const layersValue = document.getElementById('residual-layers-value');
  const weightStd = document.getElementById('residual-std');
  const weightStdValue = document.getElementById('residual-std-value');
  const chart = document.getElementById('residual-chart');
  const readout = document.getElementById('residual-readout');
  const pageFigures = document.getElementById('residual-page-figures');
  const errorBox = document.getElementById('residual-error');
  const why = document.getElementById('residual-why');
  const equation = document.getElementById('residual-equation');
  const ask = requester();

  const mode = () => section.querySelector('input[name=residual-mode]:checked').value;

  async function update() {
    const depth = Number(layers.value);
    layersValue.textContent = String(depth);
    weightStdValue.textContent = Number(weightStd.value).toFixed(2);
    const depths = depth === 6 || depth === 24 ? [6, 24] : [6, 24, depth];
    try {
      const result = await ask('/api/gradient-flow', { depths, weight_std: Number(weightStd.value), spread_seeds: 0 });  // one run drawn
      if (!result) return;
      showError(errorBox, null, { depths: layers, weight_std: weightStd });
      render(result.data, depth);
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, { depths: layers, weight_std: weightStd });
    }
  }

  // Sizes as the tutorial prints them: 3.310, or 8.62e-04 once below a thousandth.
  const size = (v) => (v >= 1e-3 ? num(v, 3) : sci(v));

  function render(data, depth) {
    const stack = data.stacks.find((s) => s.depth === depth);
    const withResidual = mode() === 'with';
    const curve = withResidual ? stack.with_residual : stack.without_residual;
    // curve[k]: after passing k layers down from the top. Bar l (left to right, 0 = the input):
    // the gradient at the output of layer l, curve[depth - l]. Both curves are drawn, side by side
    // on one axis (series 0 with, 1 without); the toggle only picks which is in full colour (its
    // bars are the chart's .bar, the other's .bar-muted), so switching never changes the scale.
    const ticks = Array.from({ length: depth + 1 }, (_, l) => (l === 0 ? 'input' : String(l)));
    const down = (c) => ticks.map((_, l) => c[depth - l]);
    const both = [
      { name: 'with residuals', values: down(stack.with_residual), muted: !withResidual },
      { name: 'without residuals', values: down(stack.without_residual), muted: withResidual },
    ];
    const largest = Math.max(...both.flatMap((s) => s.values));
    const one = (s, l) => `${both[s].name} ${size(both[s].values[l])}` +
      (zeroNote(both[s].values[l], largest) ? ' (≈ 0 for all practical purposes)' : '');
    drawChart(chart, {
      kind: 'bars',
      // (Not "with residuals" / "without residuals": those name the radio buttons.)
      label: `Gradient size per layer, ${depth} layers, with the shortcut and without it on one axis ` +
        `(${withResidual ? 'with' : 'without'} it highlighted)`,
      x: { label: 'layer (input at the left, the top layer at the right)', categories: ticks },
      // Log at every setting: without the shortcut the sizes fall by about σ·√d per layer, decades
      // at most settings of the sliders, so 'auto' would flip between linear and log as they move.
      y: { label: 'gradient size |g|', scale: 'log', format: size },
      series: both,
      describe: (s, l) => `${l === 0 ? 'gradient reaching the input' : `gradient at the output of layer ${l}`}: ` +
        `${one(s, l)}; ${one(1 - s, l)}`,
    });
    chart.dataset.mode = mode();
    chart.dataset.depth = String(depth);
    const bottom = curve[depth];
    const ratio = bottom / data.top_norm;
    const trend = ratio > 1.05 ? 'grew' : ratio < 0.95 ? 'shrank' : 'kept its size';
    readout.textContent = `${depth} layers, ${withResidual ? 'with' : 'without'} residuals: the gradient ` +
      `reaching the input has size ${size(bottom)}, ${size(ratio)} times the ${num(data.top_norm, 3)} ` +
      `it started with at the top: it ${trend} on the way down (without residuals ` +
      `${sci(stack.without_residual[depth])}, with ${num(stack.with_residual[depth], 3)}).`;
    readout.dataset.ratio = String(ratio);
    explain(Number(weightStd.value), data.params.width, depth, withResidual, ratio);
    showEquation(Number(weightStd.value), data.params.width, depth);
    for (const element of section.querySelectorAll('[data-fill=top-norm]')) element.textContent = num(data.top_norm, 3);
    for (const element of section.querySelectorAll('[data-fill=width]')) element.textContent = String(data.params.width);
    const [six, twentyFour] = data.stacks;
    pageFigures.textContent = `"Residual connections and layer normalization" runs (σ_W = ${data.params.weight_std}): 6 layers: without residual ` +
      `${sci(six.without_residual[6])}, with residual ${num(six.with_residual[6], 3)}; 24 layers: ` +
      `without ${sci(twentyFour.without_residual[24])}, with ${num(twentyFour.with_residual[24], 3)}.`;
  }

  // The per-layer equation under the chart, with the slider's σ and the API's width d: the
  // expected change in size per layer (the API's expected_* curves have exactly these ratios);
  // one draw of W scatters around it.
  function showEquation(sigma, width, depth) {
    if (!equation) return;
    const s = compact(sigma);
    const withFactor = Math.sqrt(1 + sigma * sigma * width);
    const withoutFactor = sigma * Math.sqrt(width);
    const power = (v) => (v >= 0.01 && v < 1e5 ? compact(v) : sci(v));
    equation.textContent = `Per layer, on average: with the residual the gradient is multiplied by ` +
      `(I + W)ᵀ, about √(1 + σ²·d) = √(1 + ${s}²·${width}) = ${compact(withFactor)} in size; without, ` +
      `by Wᵀ, about σ·√d = ${s}·√${width} = ${compact(withoutFactor)}. Over ${depth} layers: ` +
      `×${power(withFactor ** depth)} with, ×${power(withoutFactor ** depth)} without (expected sizes; ` +
      'the bars are one draw of W).';
    equation.dataset.withFactor = String(withFactor);
    equation.dataset.withoutFactor = String(withoutFactor);
  }

  // Why the bars do what they do, from the slider's σ and the width d: on average each layer
  // multiplies the gradient's squared size by 1 + σ²·d with the shortcut, by σ²·d without.
  function explain(sigma, width, depth, withResidual, ratio) {
    if (!why) return;
    const s = sigma.toFixed(2);
    // Three decimals in the readable range, scientific outside it.
    const big = (v) => (v >= 0.01 && v < 1e5 ? num(v, 3) : sci(v));
    const drawn = `this one draw of random weights gave ×${big(ratio)}, and single draws scatter around the average`;
    if (withResidual) {
      const factor = 1 + sigma * sigma * width;
      why.textContent = `Why: each layer multiplies the gradient by (I + W)ᵀ. The identity passes it on ` +
        `unchanged and W adds an independent part of expected squared size σ²·d times its own, so on ` +
        `average the squared size grows by 1 + σ²·d = 1 + ${s}²·${width} = ${factor.toFixed(4)} per layer, ` +
        `the size by √${factor.toFixed(4)} = ${Math.sqrt(factor).toFixed(4)}. Over ${depth} layers that ` +
        `predicts ×${big(factor ** (depth / 2))}; ${drawn}.`;
    } else {
      const factor = sigma * sigma * width;
      why.textContent = `Why: without the shortcut each layer multiplies the gradient by Wᵀ alone, whose ` +
        `expected squared size is σ²·d = ${s}²·${width} = ${factor.toFixed(4)} times the gradient's, so the ` +
        `size changes by ×${Math.sqrt(factor).toFixed(4)} per layer on average. Over ${depth} layers that ` +
        `predicts ×${big(factor ** (depth / 2))}; ${drawn}. It vanishes while σ²·d < 1 (σ below ` +
        `${(1 / Math.sqrt(width)).toFixed(3)} at d = ${width}) and explodes above.`;
    }
    why.dataset.factor = String(withResidual ? 1 + sigma * sigma * width : sigma * sigma * width);
  }

  layers.addEventListener('input', update);
  weightStd.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=residual-mode]')) {
    radio.addEventListener('change', update);
  }
  return update();
}

