// Widget 6, Depth, measured: the lab's transformer experiments against depth, every seed a model
// of its own (one request per seed, `seeds: 1, seed: s`), drawn as the mean over seeds with the
// seeds' range as a band:
//   - the post-norm / pre-norm gradient ratio at initialisation (POST /api/init-gradients), with
//     the √L growth Xiong et al. predict as a dashed reference;
//   - how far one Adam step moves the stack's output, post-norm, pre-norm and DeepNorm, at a
//     chosen learning rate (POST /api/update-size), and block by block at the deepest stack.
// drawThroughDepth() draws any per-block measurement of these answers per placement, so a new
// one (token cosine similarity through depth, when the lab reports it) is one call.
import { postJson, showError, markUpdated } from './api.js';
import { num } from './format.js';
import { drawChart } from './chart.js';
import { seedSpread } from './seed_spread.js';
import { NAMES } from './deep_stacks.js';

export const DEPTHS = [2, 4, 8, 16];
// Small stacks, so every seed answers in well under a second on two cores.
export const MODEL = { d_model: 32, n_heads: 4, d_ff: 64, batch: 4, length: 6, task: 'copy' };

const stackOf = (answer, placement, depth) =>
  answer.stacks.find((stack) => stack.placement === placement && stack.depth === depth);

// One line per placement of `value(stack)` against depth, mean and range over the seeds' answers.
function seriesAgainstDepth(answers, placements, value) {
  return placements.map((placement) => {
    const { mean, low, high } = seedSpread(answers.map((answer) =>
      DEPTHS.map((depth) => value(stackOf(answer, placement, depth)))));
    return answers.length > 1 ? { name: NAMES[placement], values: mean, low, high } : { name: NAMES[placement], values: mean };
  });
}

// Draws a per-block measurement (`field`, one value per block, bottom to top) of the stacks of
// depth `depth` in every answer, one line per placement with its seed spread.
// `withInput`: the field also holds the stack's input at index 0 (block 0 on the x axis).
export function drawThroughDepth(container, answers, field, { depth, label, yLabel, scale = 'auto', withInput = false }) {
  const placements = answers[0].params.placements;
  const first = withInput ? 0 : 1;
  const blocks = Array.from({ length: depth + 1 - first }, (_, i) => i + first);
  const series = placements.map((placement) => {
    const { mean, low, high } = seedSpread(answers.map((answer) => stackOf(answer, placement, depth)[field]));
    return answers.length > 1 ? { name: NAMES[placement], values: mean, low, high } : { name: NAMES[placement], values: mean };
  });
  drawChart(container, {
    kind: 'lines', label, x: { label: withInput ? 'block (0: the embedded input)' : 'block (bottom to top)', values: blocks }, y: { label: yLabel, scale }, series, legend: true,
  });
  return series;
}

export function setUpDepthResults() {
  const section = document.getElementById('depth-results');
  const seeds = document.getElementById('depth-seeds');
  const lr = document.getElementById('update-lr');
  const ratioChart = document.getElementById('ratio-chart');
  const ratioReadout = document.getElementById('ratio-readout');
  const ratioError = document.getElementById('ratio-error');
  const cosineChart = document.getElementById('cosine-chart');
  const cosineReadout = document.getElementById('cosine-readout');
  const updateChart = document.getElementById('update-chart');
  const updateBlocksChart = document.getElementById('update-blocks-chart');
  const updateReadout = document.getElementById('update-readout');
  const updateError = document.getElementById('update-error');
  let generation = 0;

  // Asks `path` once per seed, one after another (each is a long job on the server); resolves
  // to the answers, or null when a newer request has started meanwhile.
  async function perSeed(path, body, mine) {
    const answers = [];
    let ms = 0;
    for (let seed = 0; seed < Number(seeds.value); seed++) {
      const result = await postJson(path, { ...body, seeds: 1, seed });
      if (mine !== generation) return null;
      answers.push(result.data);
      ms += result.ms;
    }
    return { answers, ms };
  }

  async function updateRatio(mine) {
    try {
      const result = await perSeed('/api/init-gradients', { ...MODEL, placements: ['post_norm', 'pre_norm'], depths: DEPTHS }, mine);
      if (!result) return false;
      showError(ratioError, null);
      const ratios = result.answers.map((answer) => DEPTHS.map((depth) =>
        stackOf(answer, 'post_norm', depth).mean_layer_grad_norm / stackOf(answer, 'pre_norm', depth).mean_layer_grad_norm));
      const { mean, low, high } = seedSpread(ratios);
      const reference = DEPTHS.map((depth) => mean[0] * Math.sqrt(depth / DEPTHS[0]));
      const line = { name: 'post-norm / pre-norm', values: mean };
      if (ratios.length > 1) Object.assign(line, { low, high });
      drawChart(ratioChart, {
        kind: 'lines',
        label: 'Post-norm / pre-norm mean block gradient at initialisation, against depth',
        x: { label: 'depth L (blocks)', values: DEPTHS, scale: 'log' },
        y: { label: 'gradient ratio, post / pre', scale: 'linear', format: (v) => num(v, 4) },
        series: [line, { name: `√L reference, through L = ${DEPTHS[0]}`, values: reference, reference: true }],
        legend: true,
      });
      const first = mean[0];
      const lastRatio = mean.at(-1);
      const growth = lastRatio / first;
      const deepest = DEPTHS.at(-1);
      const cosine = drawThroughDepth(cosineChart, result.answers, 'token_cosine', {
        depth: deepest,
        label: `Mean cosine similarity between tokens after each block of the ${deepest}-block stacks, at initialisation`,
        yLabel: 'mean token cosine',
        scale: 'linear',
        withInput: true,
      });
      cosineReadout.textContent = `After the last of ${deepest} blocks the tokens' mean cosine is ` +
        cosine.map((line) => `${num(line.values.at(-1), 3)} in ${line.name}`).join(', ') +
        ` (the embedded input: ${num(cosine[0].values[0], 3)}).`;
      ratioReadout.textContent = `From L = ${DEPTHS[0]} to ${DEPTHS.at(-1)} the ratio goes from ${num(first, 3)} to ` +
        `${num(lastRatio, 3)}, ×${num(growth, 3)}; √L alone would give ×${num(Math.sqrt(DEPTHS.at(-1) / DEPTHS[0]), 3)}` +
        (ratios.length > 1 ? ` (mean of ${ratios.length} seeds; at L = ${DEPTHS.at(-1)} they range from ` +
          `${num(low.at(-1), 3)} to ${num(high.at(-1), 3)}).` : ' (one seed).');
      return result.ms;
    } catch (error) {
      showError(ratioError, error, { seeds });
      return false;
    }
  }

  async function updateSize(mine) {
    try {
      const placements = ['post_norm', 'pre_norm', 'deep_norm'];
      const rate = Number(lr.value);
      const result = await perSeed('/api/update-size', { ...MODEL, placements, depths: DEPTHS, lrs: [rate] }, mine);
      if (!result) return false;
      showError(updateError, null);
      const series = seriesAgainstDepth(result.answers, placements, (stack) => stack.output_change);
      drawChart(updateChart, {
        kind: 'lines',
        label: `Relative change of the stack's output after one Adam step at lr ${lr.selectedOptions[0].text}, against depth`,
        x: { label: 'depth L (blocks)', values: DEPTHS, scale: 'log' },
        y: { label: 'RMS(change) / RMS(output)', format: (v) => num(v, 4) },
        series,
        legend: true,
      });
      const deepest = DEPTHS.at(-1);
      drawThroughDepth(updateBlocksChart, result.answers, 'layer_change', {
        depth: deepest,
        label: `Relative change after each block of the ${deepest}-block stacks`,
        yLabel: 'RMS(change) / RMS(block output)',
      });
      const at = (s, i) => num(series[s].values[i], 3);
      updateReadout.textContent = `At lr ${lr.selectedOptions[0].text}, one step moves a ${deepest}-block stack's output by ` +
        series.map((line, s) => `${line.name} ${at(s, DEPTHS.length - 1)}`).join(', ') + ' of its size; from ' +
        `${DEPTHS[0]} to ${deepest} blocks ` + series.map((line) =>
        `${line.name}'s change is ×${num(line.values.at(-1) / line.values[0], 3)}`).join(', ') +
        (result.answers.length > 1 ? ` (mean of ${result.answers.length} seeds).` : ' (one seed).');
      return result.ms;
    } catch (error) {
      showError(updateError, error, { lr, seeds });
      return false;
    }
  }

  // The two experiments run one after the other: each seed is a long job on the server, which
  // runs only a few at once.
  async function updateAll() {
    const mine = ++generation;
    section.dataset.state = 'running';
    const ratioMs = await updateRatio(mine);
    if (mine !== generation) return;
    const updateMs = await updateSize(mine);
    if (mine !== generation) return;
    section.dataset.state = 'done';
    if (ratioMs !== false && updateMs !== false) markUpdated(section, ratioMs + updateMs);
  }
  async function updateOnlySize() {
    const mine = ++generation;
    section.dataset.state = 'running';
    const ms = await updateSize(mine);
    if (mine !== generation) return;
    section.dataset.state = 'done';
    if (ms !== false) markUpdated(section, ms);
  }

  seeds.addEventListener('change', updateAll);
  lr.addEventListener('change', updateOnlySize);
  return updateAll();
}
