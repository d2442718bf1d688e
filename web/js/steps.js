// Widget 3, Normalization steps: input → centred → normalised → scale & shift for any vector,
// with μ and σ after each step (POST /api/norm-steps). Tabs follow the WAI-ARIA tabs pattern:
// arrow keys move between them.
import { requester, showError, markUpdated, ApiError } from './api.js';
import { fixed, num, signed, sci } from './format.js';
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

  // A vector half typed ("2, -", "1e") does not parse yet: while the reader types, the page keeps
  // the last answer drawn and names the problem only after a pause, or at once when the field is
  // left (change, blur), instead of flashing an error at every keystroke.
  const TYPING_PAUSE_MS = 900;
  let pendingError = null;
  let pendingTimer = null;
  // Counts the calls of update: an answer still on its way when the field stopped parsing is
  // drawn (it is the last good one) but must not clear the error about what the field holds now.
  let generation = 0;
  function showPending() {
    clearTimeout(pendingTimer);
    if (pendingError) showError(errorBox, pendingError, controls);
    pendingError = null;
  }

  async function update(event) {
    const mine = ++generation;
    gammaValue.textContent = Number(gamma.value).toFixed(1);
    betaValue.textContent = Number(beta.value).toFixed(1);
    clearTimeout(pendingTimer);
    pendingError = null;
    let body;
    try {
      const x = parseList(xInput.value, 'x');
      if (x.length === 0) throw new ApiError('has no values yet, expected 1 to 4096', 'x', 0);
      body = {
        x,
        gamma: [Number(gamma.value)],
        beta: [Number(beta.value)],
        norm: norm(),
        eps: parseList(eps.value, 'eps')[0] ?? 0,
      };
    } catch (error) {
      if (event?.type === 'input' && (event.target === xInput || event.target === eps)) {
        pendingError = error;
        pendingTimer = setTimeout(showPending, TYPING_PAUSE_MS);
      } else {
        showError(errorBox, error, controls);
      }
      return;
    }
    try {
      const result = await ask('/api/norm-steps', body);
      if (!result) return;
      if (mine === generation) showError(errorBox, null, controls);
      last = result.data;
      render();
      markUpdated(section, result.ms);
    } catch (error) {
      if (mine === generation) showError(errorBox, error, controls);
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
      : ' RMSNorm ignores β.') + zeroDivisor();
    explain();
  }

  // Two surprises of the tutorials' worked examples, from the values drawn: the last output
  // against the tutorial's rounded 2.86, and σ "just under 1" that prints as 1.0000.
  function explain() {
    const roundingWhy = document.getElementById('steps-rounding-why');
    const sigmaWhy = document.getElementById('steps-sigma-why');
    if (!roundingWhy || !sigmaWhy) return;
    const layerNorm = last.params.norm === 'layer_norm';
    const g = Number(gamma.value);
    const b = layerNorm ? Number(beta.value) : 0;
    const xHat = last.steps[2].values.at(-1);
    const y = last.steps[3].values.at(-1);
    const r = Math.round(xHat * 100) / 100;
    const short = (v) => signed(String(Number(v.toFixed(3))));
    const page = layerNorm && last.params.x.join() === '2,-3,1,4' && g === 2 && b === 0.5;
    const lead = page ? `Why ${signed(fixed(y, 4))} here and 2.86 in the tutorial's worked example`
      : 'Rounding early changes the last value';
    const scaled = layerNorm ? `γ·${short(r)} + β = ${short(g)}·${short(r)} + ${short(b)}` : `γ·${short(r)} = ${short(g)}·${short(r)}`;
    roundingWhy.textContent = `${lead}: ` + (page ? 'the example rounds x̂ to two decimals before scaling, '
      : 'rounding x̂ to two decimals before scaling, as the tutorial\'s worked example does, gives ') +
      `${scaled} = ${short(g * r + b)}; unrounded, x̂ = ${signed(fixed(xHat, 4))} and the output is ` +
      `${signed(fixed(y, 4))}. Rounding moves x̂ by up to 0.005, and γ multiplies that.`;
    const sigma = last.steps[2].std;
    const eps = last.params.eps;
    if (last.op_divisor === 0) {
      sigmaWhy.textContent = '';
    } else if (!layerNorm) {
      sigmaWhy.textContent = `RMSNorm divides by the root mean square, not by σ, so step 3 brings the rms to 1 ` +
        `(just under when ε > 0) while σ = √(rms² − μ²) stays below 1 unless the mean is 0: here σ = ` +
        `${fixed(sigma, 4)} with μ = ${signed(fixed(last.steps[2].mean, 4))}.`;
    } else if (eps > 0) {
      const variance = last.steps[0].std ** 2;
      const expected = Math.sqrt(variance / (variance + eps));
      const gap = eps / (2 * variance);
      sigmaWhy.textContent = `Why σ after step 3 reads ${fixed(sigma, 4)} although ε > 0 keeps it under 1: ` +
        `step 3 divides by √(σ² + ε), not by σ, so σ becomes √(σ²/(σ² + ε)) = √(${Number(variance.toPrecision(6))}/` +
        `(${Number(variance.toPrecision(6))} + ${eps})) = ${expected.toFixed(7)} (the library: ${sigma.toFixed(7)}), ` +
        `short of 1 by about ε/(2σ²) = ${sci(gap)}` +
        (gap < 5e-5 ? ', too little for the fourth decimal to show.' : ', which the fourth decimal does show.');
    } else {
      sigmaWhy.textContent = `With ε = 0, step 3 divides by σ itself, so σ becomes 1 up to float32 rounding ` +
        `(${sigma.toFixed(7)}); an ε > 0, such as the cat example's 1e-5, leaves it just under 1.`;
    }
  }

  // ε = 0 on a vector with no spread: the API answers a divisor of 0 and normalised values of
  // exactly 0 (the library defines 0 / 0 as 0 there, docs/numerics.md), so say why.
  function zeroDivisor() {
    if (last.op_divisor !== 0) return '';
    return last.params.norm === 'layer_norm'
      ? ' Why zeros: x is constant, so its variance σ² is 0 and, with ε = 0, the divisor √(σ² + ε) is 0' +
        ' too. Every centred value x − μ is exactly 0, and 0 / 0 has no value: the library defines the' +
        ' normalised value as 0 there (not NaN), so step 3 is all zeros and step 4 is β everywhere.' +
        ' Any ε > 0 gives the same zeros without dividing by 0.'
      : ' Why zeros: x is all zeros, so mean(x²) is 0 and, with ε = 0, the divisor √(mean(x²) + ε) is 0' +
        ' too. 0 / 0 has no value: the library defines the normalised value as 0 there (not NaN), so' +
        ' steps 3 and 4 are all zeros.';
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
  for (const field of [xInput, eps]) {
    field.addEventListener('change', showPending);
    field.addEventListener('blur', showPending);
  }
  gamma.addEventListener('input', update);
  beta.addEventListener('input', update);
  for (const radio of section.querySelectorAll('input[name=steps-norm]')) {
    radio.addEventListener('change', update);
  }
  return update();
}
