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

// Section 5's "gradients at initialisation" bars are one seed's model. Whenever they are redrawn
// (their chart keeps the series drawn in data-series), say how far post-norm's top/bottom ratio
// is from the trend Xiong et al. describe, and why one seed can land far from it.
function explainInitGradients() {
  const chart = document.getElementById('init-chart');
  const why = document.getElementById('init-why');
  if (!chart || !why) return;
  const explain = () => {
    if (!chart.dataset.series) return;
    const series = JSON.parse(chart.dataset.series);
    const post = series.find((line) => line.name === NAMES.post_norm);
    const pre = series.find((line) => line.name === NAMES.pre_norm);
    if (!post || !pre) return;
    const ratio = (line) => line.values.at(-1) / line.values[0];
    const blocks = post.values.length;
    const r = ratio(post);
    why.textContent = (r >= 1.5
      ? `Post-norm's top block gets ×${num(r, 3)} its bottom block's gradient at ${blocks} blocks (pre-norm: ` +
        `×${num(ratio(pre), 3)}), the growth towards the top that Xiong et al. describe; but `
      : `Why post-norm's top/bottom ratio is only ${num(r, 3)} at ${blocks} blocks (pre-norm: ×${num(ratio(pre), 3)}), ` +
        'not the growth towards the top that Xiong et al. describe: ') +
      'these bars are one model, drawn from one seed, and in deep stacks that ratio scatters several-fold from ' +
      'seed to seed (over 64 seeds at 48 blocks its interquartile range spans several-fold, docs/lab.md), so a ' +
      'single seed can land far from the median, which does grow with depth. Section 6 averages seeds.';
    why.dataset.ratio = String(r);
  };
  new MutationObserver(explain).observe(chart, { attributes: true, attributeFilter: ['data-series'] });
  explain();
}

export function setUpDepthResults() {
  explainInitGradients();
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
  const ratioWhy = document.getElementById('ratio-why');
  const updateWhy = document.getElementById('update-why');

  // Why the verdict "faster or slower than √L" can flip with the seed count: each seed's own
  // growth of the ratio, from the ratios drawn, against √L's.
  function explainRatio(ratios, growth) {
    if (!ratioWhy) return;
    const reference = Math.sqrt(DEPTHS.at(-1) / DEPTHS[0]);
    const perSeed = ratios.map((ratio) => ratio.at(-1) / ratio[0]);
    const faster = perSeed.filter((g) => g > reference).length;
    const side = (g) => (g > reference ? 'faster' : 'slower');
    const n = ratios.length;
    const agree = faster === 0 || faster === n;
    ratioWhy.textContent = `Why the verdict depends on the seeds: with ${n === 1 ? 'one seed' : `${n} seeds`} the ratio grows ` +
      `×${num(growth, 3)}, ${side(growth)} than √L's ×${num(reference, 3)}. Each seed is one random model, and ` +
      `their own growths are ${perSeed.map((g, s) => `seed ${s} ×${num(g, 3)}`).join(', ')}` +
      (n === 1 ? '; one model says little about the trend, and a second or third can turn the verdict round.'
        : agree ? `: all ${side(growth)} here, yet a further seed can still turn the verdict round.`
          : `: they disagree, so the verdict flips as seeds are added or removed, and the mean of ` +
            'ratios leans towards the largest one.') +
      ' The lab\'s own runs use 64 seeds and quote medians with their spread (docs/lab.md).';
    ratioWhy.dataset.perSeed = JSON.stringify(perSeed);
  }

  // Why lr 1e-3 sits in a saturated regime: how far the deepest post-norm output moved, the
  // growth with depth of every placement, and whether post > pre > DeepNorm held at every depth.
  function explainUpdate(series, rateText) {
    if (!updateWhy) return;
    const deepest = DEPTHS.at(-1);
    const post = series[0].values.at(-1);
    const growths = series.map((line) => `${line.name}'s ×${num(line.values.at(-1) / line.values[0], 3)}`).join(', ');
    const ordered = DEPTHS.every((_, i) => series.every((line, s) => s === 0 || series[s - 1].values[i] > line.values[i]));
    const order = `${series.map((line) => line.name).join(' > ')} ${ordered ? 'holds at every depth' : 'does not hold at every depth'}`;
    if (post > 0.3) {
      updateWhy.textContent = `Why the lines flatten at lr ${rateText}: Adam's first step moves every weight by about ` +
        `the learning rate, and here the ${deepest}-block post-norm output already moves by ${num(post, 3)} of its own ` +
        'size. A normalised output cannot move much further than its own size, so the change saturates and its ' +
        `growth with depth flattens out towards the deepest stacks (from ${DEPTHS[0]} to ${deepest} blocks: ${growths}; ${order}). Choose 1e-5: there ` +
        'the change is small and proportional to the learning rate, the linear regime, and what grows with depth ' +
        'is the architecture\'s amplification that Liu et al. describe.';
    } else if (post > 0.1) {
      updateWhy.textContent = `At lr ${rateText} the ${deepest}-block post-norm output moves by ${num(post, 3)} of its ` +
        'size: near the edge of the linear regime, where the change is still roughly proportional to the learning ' +
        `rate but the deepest stacks begin to saturate (from ${DEPTHS[0]} to ${deepest} blocks: ${growths}; ${order}). ` +
        'At 1e-5 it is safely linear; from 1e-3 up it saturates.';
    } else {
      updateWhy.textContent = `At lr ${rateText} the change is small (the ${deepest}-block post-norm output moves by ` +
        `${num(post, 3)} of its size) and proportional to the learning rate: the linear regime, where the growth ` +
        `with depth is the architecture's own (from ${DEPTHS[0]} to ${deepest} blocks: ${growths}; ${order}). ` +
        'From 1e-3 up the output moves by a large part of its own size and the growth flattens: saturation.';
    }
    updateWhy.dataset.saturated = String(post > 0.3);
  }
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
      explainRatio(ratios, growth);
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
        // Logarithmic for every learning rate: 1e-5 and 1e-3 move the output by decades apart,
        // and the axis must not switch between linear and log as the rate changes.
        y: { label: 'RMS(change) / RMS(output)', scale: 'log', format: (v) => num(v, 4) },
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
      explainUpdate(series, lr.selectedOptions[0].text);
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
