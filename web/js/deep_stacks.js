// Widget 5, Deep stacks: live training of transformer stacks per Add & Norm placement, the loss
// curves streaming from POST /api/train (server-sent events over a fetch), a stop button; and the
// per-layer gradients at initialisation (POST /api/init-gradients).
import { ENGINE, postJson, requester, showError, markUpdated, streamEvents } from './api.js';
import { num, sci } from './format.js';
import { drawChart } from './chart.js';
import { seedSpread } from './seed_spread.js';

export const NAMES = {
  post_norm: 'post-norm', pre_norm: 'pre-norm', deep_norm: 'DeepNorm', rezero: 'ReZero',
  admin: 'Admin', no_norm: 'no norm', no_residual: 'no residual', bare: 'bare',
};

// The loss chart: one line per (placement, depth, warmup), the mean over its seeds with the
// seeds' range as a band when there are several, and the chance level dashed. Before the first
// step it already shows its axes and the legend of what will appear.
function drawLosses(container, groups, curves, steps, chance) {
  const xs = Array.from({ length: steps }, (_, i) => i + 1);
  const series = groups.map((group) => {
    const perSeed = group.runs.map((r) => xs.map((_, i) => curves[r]?.[i] ?? NaN));
    const { mean, low, high } = seedSpread(perSeed);
    return group.runs.length > 1 ? { name: group.name, values: mean, low, high } : { name: group.name, values: mean };
  });
  // chance: {loss: ln(symbols), symbols}, known once the run starts.
  series.push({ name: chance ? `chance level, ln ${chance.symbols} = ${num(chance.loss, 3)}` : 'chance level',
    values: xs.map(() => chance?.loss ?? NaN), reference: true });
  drawChart(container, {
    kind: 'lines',
    label: 'Training loss per step',
    x: { label: 'optimiser step', values: xs },
    // Linear from zero throughout a run: as the loss falls the axis must not turn logarithmic.
    y: { label: 'training loss (cross-entropy)', scale: 'linear', include: [chance?.loss ?? 2] },
    series,
    legend: true,
  });
}

function runName(run) {
  return `${NAMES[run.placement] || run.placement}, ${run.depth} blocks${run.warmup ? ', warmup' : ''}`;
}

// Runs that differ only by seed form one group: one line and its band.
function groupRuns(runs) {
  const groups = new Map();
  runs.forEach((run, index) => {
    const name = runName(run);
    if (!groups.has(name)) groups.set(name, { name, runs: [] });
    groups.get(name).runs.push(index);
  });
  return [...groups.values()];
}

// A token as the page writes it: symbols as letters, the separator as |, a blank as _.
function tokenText(token, symbols) {
  if (token === symbols) return '|';
  if (token === symbols + 1) return '_';
  return token < 26 ? String.fromCharCode(65 + token) : `s${token}`;
}

// After training: the first seed's held-out sequences for each line of the chart, what the task
// asks at each answer position and what the trained model answers (wrong answers marked).
function drawExamples(container, groups, results, symbols) {
  const rows = [];
  for (const group of groups) {
    const examples = results[group.runs[0]]?.examples ?? [];
    for (const example of examples) {
      const answer = example.targets.map((t, i) => [t, example.predicted[i]]).filter(([t]) => t >= 0);
      const input = example.tokens.filter((_, i) => example.targets[i] < 0).map((t) => tokenText(t, symbols)).join(' ');
      const cells = answer.map(([t, p]) => (t === p
        ? `<span>${tokenText(p, symbols)}</span>`
        : `<span class="wrong" title="expected ${tokenText(t, symbols)}">${tokenText(p, symbols)}</span>`)).join(' ');
      const right = answer.filter(([t, p]) => t === p).length;
      rows.push(`<tr><th scope="row">${group.name}</th><td>${input}</td>` +
        `<td>${answer.map(([t]) => tokenText(t, symbols)).join(' ')}</td><td>${cells}</td><td>${right} / ${answer.length}</td></tr>`);
    }
  }
  container.innerHTML = `<table><caption>Held-out sequences (never trained on) and the trained models' answers, first seed; ` +
    `wrong answers are marked</caption><thead><tr><th scope="col">model</th><th scope="col">input</th>` +
    `<th scope="col">expected answer</th><th scope="col">model's answer</th><th scope="col">right</th></tr></thead>` +
    `<tbody>${rows.join('')}</tbody></table>`;
  container.hidden = rows.length === 0;
}

export function setUpDeepStacks() {
  const section = document.getElementById('deep-stacks');
  const depth = document.getElementById('train-depth');
  const depthValue = document.getElementById('train-depth-value');
  const steps = document.getElementById('train-steps');
  const stepsValue = document.getElementById('train-steps-value');
  const lr = document.getElementById('train-lr');
  const task = document.getElementById('train-task');
  const warmup = document.getElementById('train-warmup');
  const start = document.getElementById('train-start');
  const stop = document.getElementById('train-stop');
  const chart = document.getElementById('train-chart');
  const seeds = document.getElementById('train-seeds');
  const status = document.getElementById('train-status');
  const examples = document.getElementById('train-examples');
  const errorBox = document.getElementById('train-error');
  let job = null;
  let stopRequested = false;
  let controller = null;

  const placementBoxes = [...section.querySelectorAll('input[name=train-placement]')];
  // Until a run starts, the chart shows the axes and legend of what Train will draw.
  const preview = () => {
    if (controller) return;
    const placements = placementBoxes.filter((c) => c.checked).map((c) => c.value);
    const seedCount = Number(seeds.value);
    const runs = placements.flatMap((placement) => Array.from({ length: seedCount },
      () => ({ placement, depth: Number(depth.value), warmup: warmup.checked })));
    drawLosses(chart, groupRuns(runs), [], Number(steps.value), null);
  };
  depth.addEventListener('input', () => { depthValue.textContent = depth.value; preview(); });
  steps.addEventListener('input', () => { stepsValue.textContent = steps.value; preview(); });
  for (const control of [...placementBoxes, seeds, warmup]) control.addEventListener('change', preview);
  preview();

  async function train() {
    const placements = [...section.querySelectorAll('input[name=train-placement]:checked')].map((c) => c.value);
    const totalSteps = Number(steps.value);
    const body = {
      placements,
      depths: [Number(depth.value)],
      steps: totalSteps,
      lr: Number(lr.value),
      task: task.value,
      warmups: [warmup.checked],
      warmup_steps: Math.max(1, Math.min(totalSteps, Math.round(totalSteps / 4))),
      seeds: Number(seeds.value),
      grad_history_points: 1,
    };
    controller = new AbortController();
    start.disabled = true;
    stop.disabled = false;
    showError(errorBox, null);
    status.textContent = 'Starting…';
    chart.dataset.state = 'starting';
    examples.hidden = true;
    chart.dataset.steps = '0';
    let runs = [];
    let groups = [];
    let curves = [];
    let chance = null;
    let pending = false;
    const redraw = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; drawLosses(chart, groups, curves, totalSteps, chance); });
    };
    try {
      await streamEvents('/api/train', body, controller.signal, (name, data) => {
        if (name === 'start') {
          job = data.job;
          runs = data.runs;
          chance = { loss: data.chance_loss, symbols: data.params.symbols };
          curves = runs.map(() => []);
          groups = groupRuns(runs);
          redraw();
          chart.dataset.state = 'running';
        } else if (name === 'step') {
          data.loss.forEach((loss, i) => curves[i].push(loss ?? NaN));
          chart.dataset.steps = String(data.step);
          status.textContent = `step ${data.step} of ${totalSteps}: ` +
            runs.map((run, i) => `${runName(run)}${groups.length < runs.length ? `, seed ${run.seed}` : ''} ` +
              `${num(data.loss[i], 3)}`).join(' · ');
          redraw();
        } else if (name === 'done') {
          drawExamples(examples, groups, data.runs, chance.symbols);
          chart.dataset.state = 'done';
          status.textContent = `Done in ${data.elapsed_s.toFixed(1)} s (chance level ${num(chance.loss, 3)}). Held-out: ` +
            runs.map((run, i) => `${runName(run)}${groups.length < runs.length ? `, seed ${run.seed}` : ''} loss ${num(data.runs[i].eval_loss, 3)}, ` +
              `accuracy ${(100 * data.runs[i].eval_accuracy).toFixed(0)}%` +
              (data.runs[i].diverged ? ' (diverged)' : '')).join(' · ');
        } else if (name === 'stopped') {
          chart.dataset.state = 'stopped';
          status.textContent = `Stopped after step ${data.step}: ${data.reason}.`;
        } else if (name === 'error') {
          chart.dataset.state = 'error';
          showError(errorBox, data);
        }
      });
      redraw();
    } catch (error) {
      if (error.name === 'AbortError') {
        // The in-browser engine stops by ending its worker: the same words as the server's
        // "stopped" event.
        chart.dataset.state = 'stopped';
        status.textContent = stopRequested ? `Stopped after step ${chart.dataset.steps}: stopped by request.` : 'Stopped.';
      } else {
        chart.dataset.state = 'error';
        showError(errorBox, error);
        status.textContent = 'Not running.';
      }
    } finally {
      job = null;
      controller = null;
      start.disabled = false;
      stop.disabled = true;
      // Stop disabled itself: keyboard focus goes back to Train rather than to the page's top.
      if (stopRequested) start.focus();
      stopRequested = false;
    }
  }

  stop.addEventListener('click', async () => {
    stop.disabled = true;
    stopRequested = true;
    if (ENGINE === 'server' && job !== null) {
      try {
        await postJson('/api/jobs/stop', { job });
        return;  // the stream ends with a "stopped" event
      } catch {
        // The run may have just finished; drop the connection below, which stops it too.
      }
    }
    controller?.abort();
  });
  start.addEventListener('click', train);

  return setUpInitGradients();
}

// How a placement's per-block gradients change from the bottom block to the top one, in words
// computed from the bars drawn.
function gradientTrend(name, perBlock) {
  const ratio = perBlock.at(-1) / perBlock[0];
  const spread = Math.max(...perBlock) / Math.min(...perBlock);
  if (ratio >= 1.5) return `${name}'s grow towards the top (top block / bottom block ${num(ratio, 3)})`;
  if (ratio <= 1 / 1.5) return `${name}'s shrink towards the top (top block / bottom block ${num(ratio, 3)})`;
  return `${name}'s top and bottom blocks are within a factor 1.5 (top / bottom ${num(ratio, 3)}; ` +
    `largest / smallest block ${num(spread, 3)})`;
}

function setUpInitGradients() {
  const section = document.getElementById('deep-stacks');
  const depth = document.getElementById('init-depth');
  const depthValue = document.getElementById('init-depth-value');
  const chart = document.getElementById('init-chart');
  const readout = document.getElementById('init-readout');
  const errorBox = document.getElementById('init-error');
  const ask = requester();
  let timer = null;

  async function update() {
    depthValue.textContent = depth.value;
    try {
      const result = await ask('/api/init-gradients', {
        placements: ['post_norm', 'pre_norm'],
        depths: [Number(depth.value)],
        d_model: 32,
        n_heads: 4,
        d_ff: 64,
        seeds: 1,
        batch: 4,
        length: 6,
      });
      if (!result) return;
      showError(errorBox, null, { depths: depth });
      const stacks = result.data.stacks;
      const perBlock = (stack) => stack.attention_grad_norm.map((a, i) => Math.hypot(a, stack.ffn_grad_norm[i]));
      const values = stacks.map(perBlock);
      drawChart(chart, {
        kind: 'bars',
        label: `Gradient norm per block at initialisation, ${stacks.map((stack) => NAMES[stack.placement]).join(' and ')}`,
        x: { label: 'block (bottom to top)', categories: values[0].map((_, block) => String(block + 1)) },
        // Logarithmic at every depth: the gradients span decades in deep stacks, and the axis
        // must not switch between linear and log as Blocks moves.
        y: { label: 'weight gradient norm', scale: 'log', format: (v) => sci(v) },
        series: stacks.map((stack, i) => ({ name: NAMES[stack.placement], values: values[i] })),
      });
      readout.textContent = `At ${depth.value} blocks, ` +
        stacks.map((stack, i) => gradientTrend(NAMES[stack.placement], values[i])).join('; ') + '.';
      section.dataset.initMs = result.ms.toFixed(1);
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, { depths: depth });
    }
  }
  depth.addEventListener('input', () => {
    depthValue.textContent = depth.value;
    clearTimeout(timer);
    timer = setTimeout(update, 200);
  });
  return update();
}
