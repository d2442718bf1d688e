// Widget 2, Normalization: the std and mean of the activations after every layer of a random
// stack, with no norm, LayerNorm, RMSNorm, pre-norm or post-norm (POST /api/activation-growth).
import { requester, showError, markUpdated } from './api.js';
import { num } from './format.js';
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
      y: { label: 'σ of the activations', format: (v) => num(v, 4) },
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

  layers.addEventListener('input', update);
  gain.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=growth-mode]')) {
    radio.addEventListener('change', update);
  }
  return update();
}

