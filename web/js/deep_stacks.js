// Widget 5, Deep stacks: live training of transformer stacks per Add & Norm placement, the loss
// curves streaming from POST /api/train (server-sent events over a fetch), a stop button; and the
// per-layer gradients at initialisation (POST /api/init-gradients).
import { postJson, requester, showError, markUpdated } from './api.js';
import { num, sci } from './format.js';
import { drawBars } from './bars.js';

const COLORS = ['#2f6fd0', '#d0622f', '#2f9d4a', '#9a4fd0', '#c9a21f', '#d04f8a', '#4fb5c9', '#7a7a7a'];
const NAMES = {
  post_norm: 'post-norm', pre_norm: 'pre-norm', deep_norm: 'DeepNorm', rezero: 'ReZero',
  no_norm: 'no norm', no_residual: 'no residual',
};

// Reads a text/event-stream body, calling onEvent(name, data) for each event.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = 'message';
      let data = '';
      for (const line of block.split('\n')) {
        if (line.startsWith('event: ')) name = line.slice(7);
        else if (line.startsWith('data: ')) data += line.slice(6);
      }
      onEvent(name, data ? JSON.parse(data) : null);
    }
  }
}

function svg(tag, attributes = {}) {
  const element = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, String(value));
  return element;
}

// Loss curves: one polyline per run over steps 1..steps, the chance level dashed.
function drawCurves(container, runs, curves, steps, chance) {
  const width = 600;
  const height = 240;
  const pad = { left: 40, right: 10, top: 10, bottom: 24 };
  const finite = curves.flat().filter((v) => Number.isFinite(v));
  const top = Math.max(chance * 1.15, ...finite.slice(0, 50 * runs.length), 0.1);
  const x = (step) => pad.left + ((step - 1) / Math.max(1, steps - 1)) * (width - pad.left - pad.right);
  const y = (loss) => pad.top + (1 - Math.min(loss, top) / top) * (height - pad.top - pad.bottom);
  const root = svg('svg', { viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none' });
  for (const fraction of [0, 0.25, 0.5, 0.75, 1]) {
    const level = top * fraction;
    root.append(svg('line', { class: 'grid', x1: pad.left, x2: width - pad.right, y1: y(level), y2: y(level) }));
    const label = svg('text', { x: 2, y: y(level) + 4 });
    label.textContent = num(level, 2);
    root.append(label);
  }
  root.append(svg('line', { class: 'chance', x1: pad.left, x2: width - pad.right, y1: y(chance), y2: y(chance) }));
  const stepLabel = svg('text', { x: width - pad.right - 60, y: height - 6 });
  stepLabel.textContent = `step ${steps}`;
  root.append(stepLabel);
  curves.forEach((curve, run) => {
    const points = [];
    curve.forEach((loss, i) => { if (Number.isFinite(loss)) points.push(`${x(i + 1).toFixed(1)},${y(loss).toFixed(1)}`); });
    root.append(svg('polyline', {
      points: points.join(' '), fill: 'none', stroke: COLORS[run % COLORS.length], 'stroke-width': 2,
      'data-run': run, 'data-points': points.length,
    }));
  });
  container.replaceChildren(root);
}

function runName(run) {
  return `${NAMES[run.placement] || run.placement}, ${run.depth} blocks${run.warmup ? ', warmup' : ''}`;
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
  const legend = document.getElementById('train-legend');
  const status = document.getElementById('train-status');
  const errorBox = document.getElementById('train-error');
  let job = null;
  let controller = null;

  depth.addEventListener('input', () => { depthValue.textContent = depth.value; });
  steps.addEventListener('input', () => { stepsValue.textContent = steps.value; });

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
      seeds: 1,
      grad_history_points: 1,
    };
    controller = new AbortController();
    start.disabled = true;
    stop.disabled = false;
    showError(errorBox, null);
    status.textContent = 'Starting…';
    chart.dataset.state = 'starting';
    chart.dataset.steps = '0';
    let runs = [];
    let curves = [];
    let chance = 1;
    let pending = false;
    const redraw = () => {
      if (pending) return;
      pending = true;
      requestAnimationFrame(() => { pending = false; drawCurves(chart, runs, curves, totalSteps, chance); });
    };
    try {
      const response = await fetch('/api/train', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) {
        const error = await response.json();
        throw Object.assign(new Error(error.error), { parameter: error.parameter });
      }
      await readEvents(response, (name, data) => {
        if (name === 'start') {
          job = data.job;
          runs = data.runs;
          chance = data.chance_loss;
          curves = runs.map(() => []);
          legend.replaceChildren(...runs.map((run, i) => {
            const item = document.createElement('li');
            const swatch = document.createElement('span');
            swatch.className = 'swatch';
            swatch.style.background = COLORS[i % COLORS.length];
            item.append(swatch, runName(run));
            return item;
          }));
          chart.dataset.state = 'running';
        } else if (name === 'step') {
          data.loss.forEach((loss, i) => curves[i].push(loss ?? NaN));
          chart.dataset.steps = String(data.step);
          status.textContent = `step ${data.step} of ${totalSteps}: ` +
            runs.map((run, i) => `${runName(run)} ${num(data.loss[i], 3)}`).join(' · ');
          redraw();
        } else if (name === 'done') {
          chart.dataset.state = 'done';
          status.textContent = `Done in ${data.elapsed_s.toFixed(1)} s (chance level ${num(chance, 3)}). Held-out: ` +
            runs.map((run, i) => `${runName(run)} loss ${num(data.runs[i].eval_loss, 3)}, ` +
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
        chart.dataset.state = 'stopped';
        status.textContent = 'Stopped.';
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
    }
  }

  stop.addEventListener('click', async () => {
    stop.disabled = true;
    if (job !== null) {
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

function setUpInitGradients() {
  const section = document.getElementById('deep-stacks');
  const depth = document.getElementById('init-depth');
  const depthValue = document.getElementById('init-depth-value');
  const post = document.getElementById('init-post-chart');
  const pre = document.getElementById('init-pre-chart');
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
      const all = stacks.flatMap(perBlock).filter((v) => v > 0);
      const options = (stack) => ({
        scale: 'log',
        min: Math.min(...all),
        max: Math.max(...all),
        axis: (v) => sci(v, 1),
        label: `Gradient norm per block at initialisation, ${NAMES[stack.placement]}`,
        describe: (item) => `block ${item.block + 1}: ${sci(item.value)}`,
      });
      for (const [stack, chart] of [[stacks[0], post], [stacks[1], pre]]) {
        drawBars(chart, perBlock(stack).map((value, block) => ({ value, block, tick: String(block + 1) })), options(stack));
      }
      readout.textContent = stacks.map((stack) => `${NAMES[stack.placement]}: top block's FFN gradient / ` +
        `bottom block's = ${num(stack.top_to_bottom_ratio, 3)}`).join('; ') + '.';
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
