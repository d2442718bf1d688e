// Widget 1, Residuals: per-layer gradient sizes through a stack of random linear layers, with and
// without the shortcut (POST /api/gradient-flow). The page's own run draws a 6-layer stack and
// then a 24-layer one from default_rng(42); the slider's stack is drawn after those two, so at 6
// and 24 layers the bars are the page's own stacks and its printed figures.
import { requester, showError, markUpdated } from './api.js';
import { sci, num } from './format.js';
import { drawChart } from './chart.js';

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
    // the gradient at the output of layer l, curve[depth - l].
    const items = [];
    for (let l = 0; l <= depth; l++) {
      items.push({ value: curve[depth - l], tick: l === 0 ? 'input' : String(l), layer: l });
    }
    drawChart(chart, {
      kind: 'bars',
      label: `Gradient size per layer, ${withResidual ? 'with' : 'without'} residuals, ${depth} layers`,
      x: { label: 'layer (input at the left, the top layer at the right)', categories: items.map((item) => item.tick) },
      y: { label: 'gradient size |g|', format: size },
      series: [{ name: withResidual ? 'with residuals' : 'without residuals', values: items.map((item) => item.value) }],
      describe: (_, l) => (l === 0
        ? `gradient reaching the input: ${size(items[l].value)}`
        : `gradient at the output of layer ${l}: ${size(items[l].value)}`),
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
    for (const element of section.querySelectorAll('[data-fill=top-norm]')) element.textContent = num(data.top_norm, 3);
    for (const element of section.querySelectorAll('[data-fill=width]')) element.textContent = String(data.params.width);
    const [six, twentyFour] = data.stacks;
    pageFigures.textContent = `"Residual connections and layer normalization" runs (σ_W = ${data.params.weight_std}): 6 layers: without residual ` +
      `${sci(six.without_residual[6])}, with residual ${num(six.with_residual[6], 3)}; 24 layers: ` +
      `without ${sci(twentyFour.without_residual[24])}, with ${num(twentyFour.with_residual[24], 3)}.`;
  }

  layers.addEventListener('input', update);
  weightStd.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=residual-mode]')) {
    radio.addEventListener('change', update);
  }
  return update();
}

