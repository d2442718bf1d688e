// Reading a diagnose JSON file (addnorm.torch.diagnose(...).to_dict(), or `python -m addnorm
// diagnose ... --json FILE`) for widget 7. The file comes from the user's disk, so it is
// checked field by field before anything is drawn: a wrong file gets one message naming the
// field and what was expected, and nothing of it reaches the page as markup (widget 7 writes
// text only). Pure functions: tested in Node (tests/browser/diagnosis_file.test.mjs).

export const MAX_FILE_BYTES = 8 * 1024 * 1024;  // a 1000-block model with 64 runs is ~6 MiB
export const MAX_BLOCKS = 1000;

export class DiagnosisFileError extends Error {}

function fail(message) {
  throw new DiagnosisFileError(message);
}

const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

// A {median, q25, q75, n} spread; a figure may be null (diagnose writes an undefined one, NaN
// in Python, as null: standard JSON).
function spreadAt(value, where) {
  if (!isObject(value)) fail(`${where} is not a {median, q25, q75} object`);
  const read = (key) => {
    const v = value[key];
    if (v === null || v === undefined) return NaN;
    if (typeof v !== 'number') fail(`${where}.${key} is a ${typeof v}, expected a number`);
    return v;
  };
  return { median: read('median'), q25: read('q25'), q75: read('q75'), n: Number.isInteger(value.n) ? value.n : 0 };
}

function stringAt(value, where, max = 200) {
  if (typeof value !== 'string') fail(`${where} is a ${value === null ? 'null' : typeof value}, expected text`);
  return value.length > max ? `${value.slice(0, max)}…` : value;
}

// The parts of the file widget 7 draws, checked; throws DiagnosisFileError naming the field.
export function parseDiagnosis(text) {
  if (typeof text !== 'string') fail('the file could not be read as text');
  if (text.length > MAX_FILE_BYTES) fail(`the file is ${text.length} bytes, expected at most ${MAX_FILE_BYTES}`);
  let data;
  try {
    data = JSON.parse(text);
  } catch (error) {
    fail(`the file is not JSON (${error.message})`);
  }
  if (!isObject(data)) fail('the file holds no object: expected the JSON diagnose writes');
  if (!isObject(data.structure)) fail('structure is missing: expected the JSON diagnose writes (to_dict() or --json)');
  const model = stringAt(data.structure.model, 'structure.model');
  const placement = stringAt(data.placement, 'placement');
  if (!Array.isArray(data.blocks) || data.blocks.length === 0) fail('blocks is not a non-empty list');
  if (data.blocks.length > MAX_BLOCKS) fail(`blocks has ${data.blocks.length} entries, expected at most ${MAX_BLOCKS}`);
  const blocks = data.blocks.map((block, i) => {
    const where = `blocks[${i}]`;
    if (!isObject(block)) fail(`${where} is not an object`);
    return {
      name: stringAt(block.name, `${where}.name`),
      placement: stringAt(block.placement, `${where}.placement`),
      grad_norm: spreadAt(block.grad_norm, `${where}.grad_norm`),
      stream_rms_in: spreadAt(block.stream_rms_in, `${where}.stream_rms_in`),
      token_cosine: spreadAt(block.token_cosine, `${where}.token_cosine`),
      relative_residual: spreadAt(block.relative_residual, `${where}.relative_residual`),
    };
  });
  if (!isObject(data.summary)) fail('summary is not an object');
  const summary = {};
  for (const key of ['top_to_bottom', 'stream_growth', 'top_token_cosine', 'output_change']) {
    summary[key] = spreadAt(data.summary[key], `summary.${key}`);
  }
  let reference = null;
  if (data.lab_reference !== null && data.lab_reference !== undefined) {
    if (!isObject(data.lab_reference) || !Number.isInteger(data.lab_reference.depth)) fail('lab_reference has no integer depth');
    reference = { depth: data.lab_reference.depth };
    for (const key of ['top_to_bottom', 'stream_growth', 'top_token_cosine', 'output_change']) {
      if (data.lab_reference[key] !== undefined) reference[key] = spreadAt(data.lab_reference[key], `lab_reference.${key}`);
    }
  }
  if (!Array.isArray(data.verdicts)) fail('verdicts is not a list');
  const verdicts = data.verdicts.slice(0, 20).map((v, i) => stringAt(v, `verdicts[${i}]`, 2000));
  const runs = Array.isArray(data.runs) ? data.runs.length : 1;
  return { model, placement, blocks, summary, reference, verdicts, runs };
}
