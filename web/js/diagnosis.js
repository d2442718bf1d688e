// Widget 7, Your model: a diagnose file (addnorm.torch.diagnose on the user's own PyTorch model,
// saved with --json or to_dict()) chosen or dropped on the section, read in the browser only
// (nothing is sent to the server), checked by diagnosis_file.js, and drawn block by block
// beside the lab's figures for the same placement.
import { showError, markUpdated } from './api.js';
import { num } from './format.js';
import { drawChart } from './chart.js';
import { parseDiagnosis, MAX_FILE_BYTES } from './diagnosis_file.js';

const SUMMARY_LABELS = {
  top_to_bottom: 'gradient, top block / bottom block',
  stream_growth: 'stream RMS growth over the stack',
  top_token_cosine: 'token cosine at the top block',
  output_change: 'output change after one step',
};

function spreadText(s) {
  if (!s || !Number.isFinite(s.median)) return '—';
  if (s.n > 1 && Number.isFinite(s.q25)) return `${num(s.median, 3)} [${num(s.q25, 3)}, ${num(s.q75, 3)}]`;
  return num(s.median, 3);
}

export function setUpDiagnosis() {
  const section = document.getElementById('diagnosis');
  const input = document.getElementById('diagnosis-file');
  const errorBox = document.getElementById('diagnosis-error');
  const heading = document.getElementById('diagnosis-model');
  const table = document.getElementById('diagnosis-summary');
  const verdictList = document.getElementById('diagnosis-verdicts');
  const gradChart = document.getElementById('diagnosis-grad-chart');
  const streamChart = document.getElementById('diagnosis-stream-chart');
  const tokenChart = document.getElementById('diagnosis-token-chart');
  const results = document.getElementById('diagnosis-results');

  function render(d) {
    const blocks = d.blocks.map((_, i) => i + 1);
    const line = (name, key) => {
      const series = { name, values: d.blocks.map((b) => b[key].median) };
      if (d.runs > 2) {
        series.low = d.blocks.map((b) => b[key].q25);
        series.high = d.blocks.map((b) => b[key].q75);
      }
      return series;
    };
    const x = { label: 'block (bottom to top)', values: blocks };
    drawChart(gradChart, { kind: 'lines', label: `Gradient norm of each block's weights, ${d.model}`, x, y: { label: 'gradient norm' }, series: [line('gradient norm', 'grad_norm')] });
    drawChart(streamChart, { kind: 'lines', label: `RMS of the residual stream entering each block, ${d.model}`, x, y: { label: 'stream RMS' }, series: [line('stream RMS', 'stream_rms_in')] });
    drawChart(tokenChart, {
      kind: 'lines', label: `Token geometry of each block's output, ${d.model}`, x, y: { label: 'cosine / relative residual', scale: 'linear', include: [0, 1] },
      series: [line('mean token cosine', 'token_cosine'), line('relative residual', 'relative_residual')], legend: true,
    });
    heading.textContent = `${d.model}: ${d.blocks.length} blocks, placement ${d.placement}` +
      `${d.runs > 1 ? `, median [IQR] over ${d.runs} runs` : ''}`;
    const rows = [['measure', 'this model', d.reference ? `lab: ${d.placement} at ${d.reference.depth} blocks` : 'lab: no stacks of this placement']];
    for (const [key, label] of Object.entries(SUMMARY_LABELS)) {
      rows.push([label, spreadText(d.summary[key]), d.reference && d.reference[key] ? spreadText(d.reference[key]) : '—']);
    }
    table.replaceChildren(...rows.map((cells, r) => {
      const tr = document.createElement('tr');
      for (const cell of cells) {
        const element = document.createElement(r === 0 ? 'th' : 'td');
        if (r === 0) element.scope = 'col';
        element.textContent = cell;
        tr.append(element);
      }
      return tr;
    }));
    verdictList.replaceChildren(...d.verdicts.map((verdict) => {
      const item = document.createElement('li');
      item.textContent = verdict;
      return item;
    }));
    results.hidden = false;
  }

  async function read(file) {
    if (!file) return;
    try {
      if (file.size > MAX_FILE_BYTES) throw new Error(`the file is ${file.size} bytes, expected at most ${MAX_FILE_BYTES}`);
      const started = performance.now();
      const diagnosis = parseDiagnosis(await file.text());
      showError(errorBox, null, { file: input });
      render(diagnosis);
      section.dataset.file = file.name;
      markUpdated(section, performance.now() - started);
    } catch (error) {
      showError(errorBox, { parameter: 'file', message: `${file.name}: ${error.message}` }, { file: input });
    }
  }

  input.addEventListener('change', () => read(input.files[0]));
  section.addEventListener('dragover', (event) => {
    event.preventDefault();
    section.classList.add('dropping');
  });
  section.addEventListener('dragleave', () => section.classList.remove('dropping'));
  section.addEventListener('drop', (event) => {
    event.preventDefault();
    section.classList.remove('dropping');
    read(event.dataTransfer.files[0]);
  });
  return Promise.resolve();
}
