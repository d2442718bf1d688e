// Widget 4, Batch norm vs layer norm: the house table (editable) normalised per column and per
// row, and a padded batch of sentences showing how padding leaks into batch statistics
// (POST /api/batch-vs-layer).
import { requester, showError, markUpdated, ApiError } from './api.js';
import { fixed, num, signed } from './format.js';
import { drawChart } from './chart.js';

const PAGE_TABLE = [[1200, 2.0, 45], [1500, 3.0, 70], [2000, 3.5, 80]];
const FEATURES = ['size (f1)', 'rooms (f2)', 'price (lakhs)'];
const MIN_ROWS = 2;
const MAX_ROWS = 64;

export function setUpBatchVsLayer() {
  const section = document.getElementById('batch-vs-layer');
  const inputBody = document.querySelector('#bvl-input tbody');
  const addRow = document.getElementById('bvl-add-row');
  const reset = document.getElementById('bvl-reset');
  const batchTable = document.getElementById('bvl-batch');
  const layerTable = document.getElementById('bvl-layer');
  const row0 = document.getElementById('bvl-row0');
  const lengths = document.getElementById('bvl-lengths');
  const padded = document.getElementById('bvl-padded');
  const meanChart = document.getElementById('bvl-mean-chart');
  const effects = document.querySelector('#bvl-effects tbody');
  const leak = document.getElementById('bvl-leak');
  const errorBox = document.getElementById('bvl-error');
  const ask = requester();

  function rowInputs() {
    return [...inputBody.querySelectorAll('tr')].map((tr) => [...tr.querySelectorAll('input')]);
  }

  function buildInputTable(rows) {
    inputBody.replaceChildren();
    rows.forEach((values) => appendRow(values));
    refreshRowControls();
  }

  function appendRow(values) {
    const tr = document.createElement('tr');
    const th = document.createElement('th');
    th.scope = 'row';
    tr.append(th);
    values.forEach((value, column) => {
      const td = document.createElement('td');
      const input = document.createElement('input');
      input.type = 'text';
      input.inputMode = 'decimal';
      input.value = String(value);
      input.dataset.column = String(column);
      input.addEventListener('input', update);
      td.append(input);
      tr.append(td);
    });
    const td = document.createElement('td');
    const remove = document.createElement('button');
    remove.type = 'button';
    remove.className = 'remove-row';
    remove.textContent = '✕';
    remove.addEventListener('click', () => {
      if (inputBody.rows.length <= MIN_ROWS) return;
      const next = tr.nextElementSibling || tr.previousElementSibling;
      tr.remove();
      refreshRowControls();
      next?.querySelector('.remove-row')?.focus();
      update();
    });
    td.append(remove);
    tr.append(td);
    inputBody.append(tr);
  }

  // Row names and the remove buttons' labels follow the rows' positions.
  function refreshRowControls() {
    [...inputBody.rows].forEach((tr, i) => {
      tr.querySelector('th').textContent = String(i + 1);
      tr.querySelectorAll('input').forEach((input, column) => {
        input.setAttribute('aria-label', `house ${i + 1}, ${FEATURES[column]}`);
      });
      const remove = tr.querySelector('.remove-row');
      remove.setAttribute('aria-label', `Remove house ${i + 1}`);
      remove.disabled = inputBody.rows.length <= MIN_ROWS;
    });
    addRow.disabled = inputBody.rows.length >= MAX_ROWS;
  }

  function readTable() {
    const table = [];
    for (const inputs of rowInputs()) {
      for (const input of inputs) {
        const value = Number(input.value);
        if (input.value.trim() === '' || !Number.isFinite(value)) {
          input.setAttribute('aria-invalid', 'true');
          throw new ApiError(`"${input.value}" in ${input.getAttribute('aria-label')} is not a number`, 'table', 0);
        }
        input.removeAttribute('aria-invalid');
        table.push(value);
      }
    }
    return table;
  }

  function readLengths() {
    const parts = lengths.value.split(/[\s,;]+/).filter((p) => p !== '');
    const numbers = parts.map(Number);
    if (numbers.some((n) => !Number.isInteger(n))) {
      throw new ApiError('sentence lengths must be whole numbers', 'lengths', 0);
    }
    return numbers;
  }

  async function update() {
    const controls = { lengths };
    try {
      const table = readTable();
      const sentenceLengths = readLengths();
      const batchSizes = [1, 2, 4, 8, 16, 32].filter((n) => n < sentenceLengths.length);
      batchSizes.push(Math.max(1, sentenceLengths.length));
      // The lab caps running_batches * tokens * width (8) at 2^19: longer batches get fewer
      // training batches for their running statistics (200 at most, the lab's default).
      const tokens = sentenceLengths.reduce((sum, n) => sum + Math.max(0, n), 0);
      const runningBatches = Math.max(1, Math.min(200, Math.floor(524288 / Math.max(1, tokens * 8))));
      const result = await ask('/api/batch-vs-layer', {
        table,
        table_columns: FEATURES.length,
        lengths: sentenceLengths,
        batch_sizes: batchSizes,
        running_batches: runningBatches,
      });
      if (!result) return;
      showError(errorBox, null, controls);
      render(result.data);
      markUpdated(section, result.ms);
    } catch (error) {
      showError(errorBox, error, controls);
    }
  }

  function cell(tag, text, className) {
    const element = document.createElement(tag);
    element.textContent = text;
    if (className) element.className = className;
    return element;
  }

  function render(data) {
    const t = data.table;
    const at = (values, r, c) => values[r * t.columns + c];
    const header = () => {
      const tr = document.createElement('tr');
      tr.append(cell('th', 'house'));
      FEATURES.forEach((name) => tr.append(cell('th', name)));
      return tr;
    };

    // Batch norm: each column normalised over the rows; its statistics under each column.
    batchTable.tHead.replaceChildren(header());
    batchTable.tBodies[0].replaceChildren();
    for (let r = 0; r < t.rows; r++) {
      const tr = document.createElement('tr');
      tr.append(cell('th', String(r + 1)));
      for (let c = 0; c < t.columns; c++) {
        const td = cell('td', signed(fixed(at(t.batch_norm, r, c), 4)));
        td.dataset.value = String(at(t.batch_norm, r, c));
        td.dataset.column = String(c);
        tr.append(td);
      }
      batchTable.tBodies[0].append(tr);
    }
    const stats = (label, values) => {
      const tr = document.createElement('tr');
      tr.append(cell('th', label, 'stat'));
      values.forEach((v) => tr.append(cell('td', signed(fixed(v, 4)), 'stat')));
      return tr;
    };
    batchTable.tFoot.replaceChildren(stats('column μ', t.batch_norm_column_means),
      stats('column σ', t.batch_norm_column_stds));

    // Layer norm: each row normalised over its features; its statistics at the end of each row.
    const layerHeader = header();
    layerHeader.append(cell('th', 'row μ', 'stat'), cell('th', 'row σ', 'stat'));
    layerTable.tHead.replaceChildren(layerHeader);
    layerTable.tBodies[0].replaceChildren();
    for (let r = 0; r < t.rows; r++) {
      const tr = document.createElement('tr');
      tr.dataset.row = String(r);
      tr.append(cell('th', String(r + 1)));
      for (let c = 0; c < t.columns; c++) {
        const td = cell('td', signed(fixed(at(t.layer_norm, r, c), 4)));
        td.dataset.value = String(at(t.layer_norm, r, c));
        tr.append(td);
      }
      tr.append(cell('td', signed(fixed(t.layer_norm_row_means[r], 4)), 'stat'),
        cell('td', fixed(t.layer_norm_row_stds[r], 4), 'stat'));
      layerTable.tBodies[0].append(tr);
    }
    linkHighlights();

    // Alone, house 1 is a batch of one: batch norm has nothing to compare it with (the library
    // refuses, and says why, or returns zeros), while layer norm gives the same row as in the batch.
    const batchAlone = t.batch_norm_row0_alone
      ? `[${t.batch_norm_row0_alone.map((v) => signed(fixed(v, 4))).join(', ')}]`
      : `nothing: "${t.batch_norm_row0_alone_error}"`;
    row0.textContent = `House 1 normalised alone (a batch of one): batch norm gives ${batchAlone}; ` +
      `layer norm gives [${t.layer_norm_row0_alone.map((v) => signed(fixed(v, 4))).join(', ')}], ` +
      `the same as in the batch.`;

    renderPadding(data);
  }

  // Hovering a result cell lights up the inputs its statistics came from.
  function linkHighlights() {
    batchTable.tBodies[0].querySelectorAll('td').forEach((td) => {
      td.addEventListener('mouseenter', () => {
        clearHighlights();
        inputBody.querySelectorAll(`input[data-column="${td.dataset.column}"]`)
          .forEach((input) => input.parentElement.classList.add('column-hi'));
      });
      td.addEventListener('mouseleave', showFocused);
    });
    layerTable.tBodies[0].querySelectorAll('tr').forEach((tr) => {
      tr.addEventListener('mouseenter', () => {
        clearHighlights();
        inputBody.rows[Number(tr.dataset.row)]?.classList.add('row-hi');
      });
      tr.addEventListener('mouseleave', showFocused);
    });
    showFocused();
  }

  // The keyboard's way to the same highlight: a focused result table (its scrolling box takes
  // the focus) lights up one column (batch norm) or row (layer norm), in itself and among the
  // houses it came from; the arrow keys move it.
  const batchWrap = batchTable.closest('.table-wrap');
  const layerWrap = layerTable.closest('.table-wrap');
  const keyed = { column: 0, row: 0 };
  function clearHighlights() {
    section.querySelectorAll('.column-hi, .row-hi').forEach((e) => e.classList.remove('column-hi', 'row-hi'));
  }
  function showFocused() {
    clearHighlights();
    if (document.activeElement === batchWrap) {
      keyed.column = Math.min(keyed.column, FEATURES.length - 1);
      const selector = `[data-column="${keyed.column}"]`;
      batchTable.tBodies[0].querySelectorAll(`td${selector}`).forEach((td) => td.classList.add('column-hi'));
      inputBody.querySelectorAll(`input${selector}`).forEach((input) => input.parentElement.classList.add('column-hi'));
    } else if (document.activeElement === layerWrap) {
      keyed.row = Math.max(0, Math.min(keyed.row, layerTable.tBodies[0].rows.length - 1));
      layerTable.tBodies[0].rows[keyed.row]?.classList.add('row-hi');
      inputBody.rows[keyed.row]?.classList.add('row-hi');
    }
  }
  for (const wrap of [batchWrap, layerWrap]) {
    wrap.addEventListener('focus', showFocused);
    wrap.addEventListener('blur', clearHighlights);
  }
  batchWrap.addEventListener('keydown', (event) => {
    const move = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!move) return;
    keyed.column = (keyed.column + move + FEATURES.length) % FEATURES.length;
    showFocused();
    event.preventDefault();
  });
  layerWrap.addEventListener('keydown', (event) => {
    const move = { ArrowDown: 1, ArrowUp: -1 }[event.key];
    const rows = layerTable.tBodies[0].rows.length;
    if (!move || rows === 0) return;
    keyed.row = (keyed.row + move + rows) % rows;
    showFocused();
    event.preventDefault();
  });

  function renderPadding(data) {
    const p = data.padding;
    padded.replaceChildren();
    data.params.lengths.forEach((length, s) => {
      const row = document.createElement('div');
      row.className = 'row';
      row.append(cell('span', `sentence ${s}`, 'label'));
      for (let position = 0; position < p.padded_length; position++) {
        row.append(cell('span', '', position < length ? 'cell' : 'cell pad'));
      }
      padded.append(row);
    });
    padded.setAttribute('aria-label', `${p.sentences} sentences padded to ${p.padded_length} positions: ` +
      `${p.real_tokens} real tokens and ${p.padded_tokens - p.real_tokens} padding positions`);

    drawChart(meanChart, {
      kind: 'bars',
      height: 200,
      label: 'Per-feature mean, with the padding counted and over real tokens only',
      x: { label: 'feature', categories: p.mean_with_padding.map((_, f) => `f${f}`) },
      y: { label: 'mean over the batch', scale: 'linear', format: (v) => num(v, 4) },
      series: [
        { name: 'padding counted', values: p.mean_with_padding },
        { name: 'real tokens only', values: p.mean_real_only },
      ],
    });
    effects.replaceChildren();
    for (const e of data.batch_sizes) {
      const tr = document.createElement('tr');
      tr.append(cell('td', String(e.batch_size)), cell('td', String(e.padded_length)),
        cell('td', num(e.batch_norm_padded, 4)), cell('td', num(e.batch_norm_real, 4)),
        cell('td', num(e.layer_norm, 4)));
      effects.append(tr);
    }
    leak.textContent = `In the full padded batch (${p.padded_tokens} positions, ${p.real_tokens} real), ` +
      `sentence 0's batch-norm output moves by up to ${num(p.sentence0_output_shift, 4)} because the ` +
      `padding is counted; layer norm's moves by ${num(data.modes.layer_norm, 4)} between training and ` +
      `inference, batch norm's by ${num(data.modes.batch_norm_in_batch, 4)}.`;
  }

  addRow.addEventListener('click', () => {
    if (inputBody.rows.length >= MAX_ROWS) return;
    const last = rowInputs().at(-1).map((input) => Number(input.value) || 0);
    appendRow(last.map((v) => Math.round(v * 1.1 * 100) / 100));
    refreshRowControls();
    inputBody.rows[inputBody.rows.length - 1].querySelector('input').focus();
    update();
  });
  reset.addEventListener('click', () => {
    buildInputTable(PAGE_TABLE);
    update();
  });
  lengths.addEventListener('input', update);
  buildInputTable(PAGE_TABLE);
  return update();
}
