// Widget 3, Normalization steps: input → centred → normalised → scale & shift for any vector,
// with μ and σ after each step (POST /api/norm-steps). Tabs follow the WAI-ARIA tabs pattern:
// arrow keys move between them.
import { requester, showError, markUpdated, ApiError } from './api.js';
import { fixed, num, signed } from './format.js';
import { drawChart } from './chart.js';

const PRESETS = {
  page: { x: '2, -3, 1, 4', gamma: 2, beta: 0.5, eps: '0' },
  cat: { x: '2, 4, 6, 8', gamma: 1, beta: 0, eps: '1e-5' },
};

const FORMULAS = {
  layer_norm: [
    'x',
    'x − μ',
    '(x − μ) / √(σ² + ε)',
    'γ · (x − μ) / √(σ² + ε) + β',
  ],
  rms_norm: [
    'x',
    'x   (RMSNorm does not subtract the mean)',
    'x / √(mean(x²) + ε)',
    'γ · x / √(mean(x²) + ε)   (RMSNorm has no β)',
  ],
};

export function setUpSteps() {
  const section = document.getElementById('steps');
  const xInput = document.getElementById('steps-x');
  const gamma = document.getElementById('steps-gamma');
  const gammaValue = document.getElementById('steps-gamma-value');
  const beta = document.getElementById('steps-beta');
  const betaValue = document.getElementById('steps-beta-value');
  const eps = document.getElementById('steps-eps');
  const tabs = [...section.querySelectorAll('[role=tab]')];
  const panel = document.getElementById('steps-panel');
  const formula = document.getElementById('steps-formula');
  const chart = document.getElementById('steps-chart');
  const values = document.getElementById('steps-values');
  const stats = document.getElementById('steps-stats');
  const note = document.getElementById('steps-note');
  const errorBox = document.getElementById('steps-error');
  const controls = { x: xInput, gamma, beta, eps };
  const ask = requester();
  let selected = 0;
  let last = null;

  const norm = () => section.querySelector('input[name=steps-norm]:checked').value;

  function parseList(text, name) {
    const parts = text.split(/[\s,;]+/).filter((part) => part !== '');
    const numbers = parts.map(Number);
    const bad = parts.findIndex((part, i) => !Number.isFinite(numbers[i]));
    if (bad >= 0) throw new ApiError(`"${parts[bad]}" is not a number`, name, 0);
    return numbers;
  }

  async function update() {
    gammaValue.textContent = Number(gamma.value).toFixed(1);
    betaValue.textContent = Number(beta.value).toFixed(1);
    try {
      const body = {
        x: parseList(xInput.value, 'x'),
        gamma: [Number(gamma.value)],
        beta: [Number(beta.value)],
        norm: norm(),
        eps: parseList(eps.value, 'eps')[0] ?? 0,
      };
      const result = await ask('/api/norm-steps', body);
      if (!result) return;
      showError(errorBox, null, controls);
      last = result.data;
      render();
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, controls);
    }
  }

  function select(index, focus) {
    selected = index;
    tabs.forEach((tab, i) => {
      tab.setAttribute('aria-selected', String(i === index));
      tab.tabIndex = i === index ? 0 : -1;
    });
    panel.setAttribute('aria-labelledby', tabs[index].id);
    if (focus) tabs[index].focus();
    render();
  }

  function render() {
    if (!last) return;
    const step = last.steps[selected];
    formula.textContent = `step ${selected + 1}: ${FORMULAS[last.params.norm][selected]}`;
    // One axis for all four steps, so the tabs compare like with like.
    const all = last.steps.flatMap((s) => s.values);
    drawChart(chart, {
      kind: 'bars',
      label: `Values after step ${selected + 1}`,
      x: { label: 'feature', categories: step.values.map((_, i) => `x${i + 1}`) },
      y: { label: 'value', scale: 'linear', include: [Math.min(...all), Math.max(...all)], format: (v) => num(v, 4) },
      series: [{ name: `step ${selected + 1}`, values: step.values }],
      describe: (_, i) => `value ${i + 1}: ${num(step.values[i], 4)}`,
    });
    const shown = step.values.length > 16 ? step.values.slice(0, 16) : step.values;
    values.textContent = `[${shown.map((v) => signed(fixed(v, 4))).join(', ')}${step.values.length > 16 ? ', …' : ''}]`;
    stats.innerHTML = '';
    const mu = document.createElement('strong');
    mu.textContent = `μ = ${signed(fixed(step.mean, 4))}`;
    const sigma = document.createElement('strong');
    sigma.textContent = `σ = ${fixed(step.std, 4)}`;
    stats.append('After this step: ', mu, ', ', sigma, `, rms = ${fixed(step.rms, 4)}`);
    stats.dataset.mean = String(step.mean);
    stats.dataset.std = String(step.std);
    const divisor = last.params.norm === 'layer_norm' ? '√(σ² + ε)' : '√(mean(x²) + ε)';
    note.textContent = `The op's own statistics: mean ${num(last.op_mean, 4)}, divisor ${divisor} = ` +
      `${num(last.op_divisor, 5)}.` + (last.params.norm === 'layer_norm'
      ? ` Setting γ to the divisor and β to the mean gives back [${last.undone.map((v) => signed(fixed(v, 4))).join(', ')}].`
      : ' RMSNorm ignores β.');
  }

  tabs.forEach((tab, i) => {
    tab.addEventListener('click', () => select(i, false));
    tab.addEventListener('keydown', (event) => {
      const moves = { ArrowRight: 1, ArrowLeft: -1 };
      if (event.key in moves) {
        select((selected + moves[event.key] + tabs.length) % tabs.length, true);
      } else if (event.key === 'Home') {
        select(0, true);
      } else if (event.key === 'End') {
        select(tabs.length - 1, true);
      } else {
        return;
      }
      event.preventDefault();
    });
  });
  for (const [name, preset] of Object.entries(PRESETS)) {
    document.getElementById(`steps-preset-${name}`).addEventListener('click', () => {
      xInput.value = preset.x;
      gamma.value = String(preset.gamma);
      beta.value = String(preset.beta);
      eps.value = preset.eps;
      update();
    });
  }
  xInput.addEventListener('input', update);
  eps.addEventListener('input', update);
  gamma.addEventListener('input', update);
  beta.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=steps-norm]')) {
    radio.addEventListener('change', update);
  }
  return update();
}
