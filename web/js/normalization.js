// Widget 2, Normalization: the std and mean of the activations after every layer of a random
// stack, with no norm, LayerNorm, RMSNorm, pre-norm or post-norm (POST /api/activation-growth).
import { requester, showError, markUpdated } from './api.js';
import { num, sci } from './format.js';
import { drawChart } from './chart.js';

const MODE_NAMES = {
  none: 'no normalization',
  layer_norm: 'LayerNorm after every layer',
  rms_norm: 'RMSNorm after every layer',
  pre_norm: 'pre-norm, x + F(LN(x))',
  post_norm: 'post-norm, LN(x + F(x))',
};

export function setUpNormalization() {
  const section = document.getElementById('normalization');
  const layers = document.getElementById('growth-layers');
  const layersValue = document.getElementById('growth-layers-value');
  const gain = document.getElementById('growth-gain');
  const gainValue = document.getElementById('growth-gain-value');
  const stdChart = document.getElementById('growth-std-chart');
  const meanChart = document.getElementById('growth-mean-chart');
  const readout = document.getElementById('growth-readout');
  const errorBox = document.getElementById('growth-error');
  const why = document.getElementById('growth-why');
  const ask = requester();
  const mode = () => section.querySelector('input[name=growth-mode]:checked').value;

  async function update() {
    layersValue.textContent = layers.value;
    gainValue.textContent = Number(gain.value).toFixed(2);
    const controls = { layers, gain };
    try {
      const result = await ask('/api/activation-growth', {
        layers: Number(layers.value),
        gain: Number(gain.value),
        modes: [mode()],
        spread_seeds: 0,  // the widget draws its one run; the seed spread is the CLI's
      });
      if (!result) return;
      showError(errorBox, null, controls);
      render(result.data.curves[0]);
      explain(result.data.curves[0], Number(gain.value));
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, controls);
    }
  }

  function render(curve) {
    const layers = curve.std.map((_, i) => (i === 0 ? 'input' : String(i)));
    const where = (i) => (i === 0 ? 'of the input' : `after layer ${i}`);
    drawChart(stdChart, {
      kind: 'bars',
      label: `Standard deviation per layer, ${MODE_NAMES[curve.mode]}`,
      x: { label: 'layer', categories: layers },
      // Always logarithmic: σ spans decades without a norm and sits at 1 with one, and the axis
      // must not switch between linear and log as the mode or the sliders move.
      y: { label: 'σ of the activations', scale: 'log', format: (v) => num(v, 4) },
      series: [{ name: 'σ', values: curve.std.map((v) => v ?? Infinity) }],
      describe: (_, i) => `σ ${where(i)}: ${num(curve.std[i], 4)}`,
    });
    drawChart(meanChart, {
      kind: 'bars',
      height: 170,
      label: `Mean per layer, ${MODE_NAMES[curve.mode]}`,
      x: { label: 'layer', categories: layers },
      y: { label: 'mean', scale: 'linear', format: (v) => num(v, 4) },
      series: [{ name: 'mean', values: curve.mean.map((v) => v ?? NaN) }],
      describe: (_, i) => `mean ${where(i)}: ${num(curve.mean[i], 4)}`,
    });
    stdChart.dataset.mode = curve.mode;
    const last = curve.std.length - 1;
    const finalStd = curve.std[last];
    let text = `${MODE_NAMES[curve.mode]}: σ after layer ${last} is ${finalStd === null ? 'not finite' : num(finalStd, 4)}`;
    if (curve.overflowed) text += ' — the activations overflowed float32';
    else if (curve.first_layer_past_100 > 0) text += `; σ first passes 100 at layer ${curve.first_layer_past_100}`;
    else text += '; σ never passes 100';
    readout.textContent = `${text}. Mean after layer ${last}: ${num(curve.mean[last], 3)}.`;
    readout.dataset.finalStd = String(finalStd);
  }

  // Why σ ends where it does, from the drawn σ of the input, the gain slider and the depth.
  function explain(curve, g) {
    if (!why) return;
    const last = curve.std.length - 1;
    const start = curve.std[0];
    const size = (v) => (Math.abs(v) >= 1e5 ? sci(v, 2) : num(v, Math.abs(v) >= 100 ? 1 : 4));
    const final = curve.std[last] === null ? 'not finite' : size(curve.std[last]);
    const gs = g.toFixed(2);
    let text;
    if (curve.mode === 'pre_norm') {
      const expected = Math.sqrt(start * start + last * g * g);
      text = `Why σ keeps rising although there is a norm: in pre-norm the norm acts only on the ` +
        `branch's input, so every layer adds F(LN(x)), whose spread is about the gain whatever x is, ` +
        `to a stream that nothing normalises. Independent additions add their variances, so σ² grows ` +
        `by gain² = ${gs}² = ${(g * g).toFixed(4)} per layer: after ${last} layers σ ≈ √(σ₀² + L·gain²) = ` +
        `√(${num(start, 4)}² + ${last}·${(g * g).toFixed(4)}) = ${size(expected)}, against ${final} drawn. ` +
        'That is growth like √L, not the gain^L of no normalization.';
      why.dataset.expected = String(expected);
    } else if (curve.mode === 'none') {
      const expected = start * g ** last;
      text = `Why: each layer multiplies σ by about the gain, so after ${last} layers σ ≈ σ₀·gain^L = ` +
        `${num(start, 4)}·${gs}^${last} = ${size(expected)}; drawn: ${final}. Below a gain of 1 the ` +
        'same product shrinks σ towards 0.';
      why.dataset.expected = String(expected);
    } else {
      const where = curve.mode === 'post_norm' ? 'the norm is the last operation of every layer, LN(x + F(x)), '
        : 'the norm is the last operation of every layer, ';
      const rescaled = curve.mode === 'rms_norm'
        ? 'so whatever the layer produced is rescaled per token to a root mean square of 1, which is σ 1 while the mean stays near 0'
        : 'so whatever the layer produced is rescaled per token to mean 0 and σ 1';
      text = `Why σ stays at 1: ${where}${rescaled}; ε > 0 under the square root keeps it a hair under 1 ` +
        `(${final} after layer ${last}).`;
      delete why.dataset.expected;
    }
    why.textContent = text;
  }

  layers.addEventListener('input', update);
  gain.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=growth-mode]')) {
    radio.addEventListener('change', update);
  }
  return update();
}

