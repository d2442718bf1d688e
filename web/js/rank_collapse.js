// Two widgets of section 5 that ask for whole experiments: rank collapse through attention-only
// stacks (POST /api/rank-collapse: the median relative residual per block with the seeds'
// quartiles as a band, one line per placement), and a small trainability map (POST
// /api/trainability-map: one table cell per placement, depth, rate and schedule).
import { requester, showError, markUpdated } from './api.js';
import { num, sci } from './format.js';
import { drawChart } from './chart.js';
import { NAMES } from './deep_stacks.js';

const RANK_PLACEMENTS = ['bare', 'no_residual', 'no_norm', 'post_norm', 'pre_norm'];
export const RANK_REQUEST = { placements: RANK_PLACEMENTS, seeds: 4, batch: 4, tokens: 16 };

export const MAP_REQUEST = {
  placements: ['post_norm', 'pre_norm', 'deep_norm', 'admin'],
  depths: [2, 6],
  lrs: [0.003, 0.01],
  schedules: ['constant', 'linear'],
  warmup_steps: [50],
  steps: 300,
  seeds: 1,
};

// "collapsed at block 3" or "never below 10⁻³", from what the API computed.
function collapseText(curve, threshold) {
  return curve.collapsed_at > 0 ? `collapsed at block ${curve.collapsed_at}`
    : `never below ${sci(threshold)}`;
}

export function setUpRankCollapse() {
  const section = document.getElementById('deep-stacks');
  const depth = document.getElementById('rank-depth');
  const depthValue = document.getElementById('rank-depth-value');
  const chart = document.getElementById('rank-chart');
  const readout = document.getElementById('rank-readout');
  const errorBox = document.getElementById('rank-error');
  const ask = requester();
  let timer = null;

  async function update() {
    depthValue.textContent = depth.value;
    try {
      const result = await ask('/api/rank-collapse', { ...RANK_REQUEST, depth: Number(depth.value) });
      if (!result) return;
      showError(errorBox, null, { depth });
      const answer = result.data;
      const blocks = answer.curves[0].residual.map((_, i) => i);
      drawChart(chart, {
        kind: 'lines',
        label: 'Relative residual of the tokens after each attention-only block, per placement',
        x: { label: 'after block (0: the random input)', values: blocks },
        y: { label: 'relative residual ‖X − 1x̄ᵀ‖ / ‖X‖', scale: 'log', format: (v) => sci(v) },
        series: answer.curves.map((curve) => ({
          name: NAMES[curve.placement] || curve.placement,
          values: curve.residual.map((s) => s.median),
          low: curve.residual.map((s) => s.q25),
          high: curve.residual.map((s) => s.q75),
        })),
      });
      readout.textContent = `After ${depth.value} blocks (median of ${answer.params.seeds} seeds): ` +
        answer.curves.map((curve) => `${NAMES[curve.placement] || curve.placement} ` +
          `${sci(curve.residual.at(-1).median)}, ${collapseText(curve, answer.collapsed_below)}`).join('; ') +
        '. At about 10⁻⁷ and below the tokens are equal up to float32 rounding.';
      section.dataset.rankMs = result.ms.toFixed(1);
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, { depth });
    }
  }
  depth.addEventListener('input', () => {
    depthValue.textContent = depth.value;
    clearTimeout(timer);
    timer = setTimeout(update, 200);
  });
  setUpMap();
  return update();
}

function cellKey(cell) {
  return `${cell.depth}|${cell.lr}|${cell.schedule}`;
}

function setUpMap() {
  const start = document.getElementById('map-start');
  const table = document.getElementById('map-table');
  const readout = document.getElementById('map-readout');
  const errorBox = document.getElementById('map-error');
  const ask = requester();

  async function run() {
    start.disabled = true;
    readout.textContent = `Training ${MAP_REQUEST.placements.length * MAP_REQUEST.depths.length *
      MAP_REQUEST.lrs.length * MAP_REQUEST.schedules.length} models…`;
    table.dataset.state = 'running';
    try {
      const result = await ask('/api/trainability-map', MAP_REQUEST);
      if (!result) return;
      showError(errorBox, null);
      const answer = result.data;
      const columns = MAP_REQUEST.depths.flatMap((d) => MAP_REQUEST.lrs.flatMap((lr) =>
        MAP_REQUEST.schedules.map((schedule) => ({ d, lr, schedule }))));
      const head = table.querySelector('thead');
      const body = table.querySelector('tbody');
      head.replaceChildren();
      body.replaceChildren();
      const headRow = document.createElement('tr');
      headRow.append(Object.assign(document.createElement('th'), { scope: 'col', textContent: 'placement' }));
      for (const c of columns) {
        headRow.append(Object.assign(document.createElement('th'), {
          scope: 'col',
          textContent: `${c.d} blocks, lr ${sci(c.lr)}, ${c.schedule === 'constant' ? 'no warmup' : 'warmup'}`,
        }));
      }
      head.append(headRow);
      const trained = {};
      for (const placement of MAP_REQUEST.placements) {
        const row = document.createElement('tr');
        row.append(Object.assign(document.createElement('th'), { scope: 'row', textContent: NAMES[placement] }));
        const cells = new Map(answer.cells.filter((c) => c.placement === placement).map((c) => [cellKey(c), c]));
        trained[placement] = 0;
        for (const c of columns) {
          const cell = cells.get(cellKey({ depth: c.d, lr: c.lr, schedule: c.schedule }));
          const td = document.createElement('td');
          td.textContent = `${num(cell.final_loss.median, 3)}${cell.trained > 0 ? ' ✓' : ''}`;
          td.dataset.loss = String(cell.final_loss.median);
          td.dataset.trained = String(cell.trained);
          trained[placement] += cell.trained;
          row.append(td);
        }
        body.append(row);
      }
      table.dataset.state = 'done';
      readout.textContent = `Trained, of ${columns.length} settings: ` +
        MAP_REQUEST.placements.map((p) => `${NAMES[p]} ${trained[p]}`).join(', ') +
        ` (chance loss ${num(answer.chance_loss, 3)}; ${(result.ms / 1000).toFixed(1)} s).`;
    } catch (error) {
      table.dataset.state = 'error';
      showError(errorBox, error);
      readout.textContent = 'Not run.';
    } finally {
      start.disabled = false;
    }
  }
  start.addEventListener('click', run);
}
