// Widget 7's file reader (web/js/diagnosis_file.js) in Node: a diagnose file is read field by
// field, and every wrong or hostile file gets one message naming the field, never a crash.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDiagnosis, DiagnosisFileError, MAX_FILE_BYTES, MAX_BLOCKS } from '../../web/js/diagnosis_file.js';

const spread = (median, q25 = median, q75 = median, n = 1) => ({ median, q25, q75, n });
const block = (i) => ({
  name: `layers.${i}`, placement: 'pre_norm', grad_norm: spread(10 - i), stream_rms_in: spread(1 + i / 10),
  token_cosine: spread(0.1 * i), relative_residual: spread(1 - 0.1 * i), shortcut: spread(0.97), norms: [],
});
const valid = () => ({
  structure: { model: 'TransformerEncoder', blocks: ['layers.0', 'layers.1', 'layers.2'], norms: {} },
  placement: 'pre_norm', depth: 3, blocks: [block(0), block(1), block(2)],
  summary: { top_to_bottom: spread(0.4, 0.3, 0.5, 4), stream_growth: spread(2.5), top_token_cosine: spread(0.2),
    top_relative_residual: spread(0.8), output_change: spread(0.3), perturbation_change: spread(0.01) },
  lab_reference: { depth: 6, top_to_bottom: spread(0.52, 0.46, 0.61, 64) }, verdicts: ['pre-norm, 3 blocks'],
  runs: [{}, {}, {}, {}],
});

test('a diagnose file is read: blocks, summary, the lab reference, verdicts', () => {
  const d = parseDiagnosis(JSON.stringify(valid()));
  assert.equal(d.model, 'TransformerEncoder');
  assert.equal(d.blocks.length, 3);
  assert.deepEqual(d.blocks.map((b) => b.grad_norm.median), [10, 9, 8]);
  assert.deepEqual(d.summary.top_to_bottom, spread(0.4, 0.3, 0.5, 4));
  assert.equal(d.reference.depth, 6);
  assert.equal(d.reference.stream_growth, undefined);
  assert.equal(d.runs, 4);
  // diagnose writes an undefined figure as null (one-token outputs have no cosine).
  const file = valid();
  file.blocks[0].token_cosine = { median: null, q25: null, q75: null, n: 0 };
  assert.ok(Number.isNaN(parseDiagnosis(JSON.stringify(file)).blocks[0].token_cosine.median));
  file.lab_reference = null;
  assert.equal(parseDiagnosis(JSON.stringify(file)).reference, null);
});

const broken = [
  ['not JSON', () => '{"structure": ', /not JSON/],
  ['a list', () => '[1, 2]', /holds no object/],
  ['no structure', () => JSON.stringify({ ...valid(), structure: undefined }), /structure is missing/],
  ['model a number', () => { const f = valid(); f.structure.model = 7; return JSON.stringify(f); }, /structure\.model is a number, expected text/],
  ['no blocks', () => JSON.stringify({ ...valid(), blocks: [] }), /blocks is not a non-empty list/],
  ['too many blocks', () => JSON.stringify({ ...valid(), blocks: Array.from({ length: MAX_BLOCKS + 1 }, (_, i) => block(i)) }), /at most 1000/],
  ['a string median', () => { const f = valid(); f.blocks[1].grad_norm.median = '9'; return JSON.stringify(f); }, /blocks\[1\]\.grad_norm\.median is a string, expected a number/],
  ['a missing spread', () => { const f = valid(); delete f.blocks[2].stream_rms_in; return JSON.stringify(f); }, /blocks\[2\]\.stream_rms_in is not/],
  ['a block not an object', () => { const f = valid(); f.blocks[0] = 'x'; return JSON.stringify(f); }, /blocks\[0\] is not an object/],
  ['summary missing a figure', () => { const f = valid(); delete f.summary.output_change; return JSON.stringify(f); }, /summary\.output_change/],
  ['a reference without depth', () => { const f = valid(); f.lab_reference = { top_to_bottom: spread(1) }; return JSON.stringify(f); }, /lab_reference has no integer depth/],
  ['verdicts not a list', () => JSON.stringify({ ...valid(), verdicts: 'fine' }), /verdicts is not a list/],
  ['a verdict not text', () => JSON.stringify({ ...valid(), verdicts: [{}] }), /verdicts\[0\] is a object, expected text/],
];
for (const [what, make, message] of broken) {
  test(`a file with ${what} is refused by name`, () => {
    assert.throws(() => parseDiagnosis(make()), (error) => error instanceof DiagnosisFileError && message.test(error.message));
  });
}

test('hostile files: huge, deeply nested, markup in names', () => {
  assert.throws(() => parseDiagnosis(' '.repeat(MAX_FILE_BYTES + 1)), /at most 8388608/);
  // JSON nested past the engine's stack is a clear refusal, not a crash of the page.
  const deep = '['.repeat(200000) + ']'.repeat(200000);
  assert.throws(() => parseDiagnosis(deep), DiagnosisFileError);
  const f = valid();
  f.blocks[0].name = '<img src=x onerror=alert(1)>';
  f.verdicts = ['x'.repeat(5000)];
  const d = parseDiagnosis(JSON.stringify(f));
  assert.equal(d.blocks[0].name, '<img src=x onerror=alert(1)>');  // kept as text; the widget writes textContent
  assert.equal(d.verdicts[0].length, 2001);  // long text is cut, with an ellipsis
});
