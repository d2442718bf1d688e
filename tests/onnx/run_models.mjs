// Runs ONNX models in ONNX Runtime (onnxruntime-node, CPU execution provider) for
// tests/python/test_onnx_runtime.py. Usage: node run_models.mjs manifest.json
//
// The manifest lists cases: {name, model, inputs: [{name, dtype, dims, file}]}, each input a
// raw little-endian file. For each case the outputs are written next to the manifest as
// <name>.<index>.bin, and one JSON line per case goes to stdout:
// {name, outputs: [{name, dtype, dims, file}]} or {name, error}. A case that fails does not
// stop the others; the exit status is non-zero only when the manifest cannot be read.
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ort from 'onnxruntime-node';

// ONNX Runtime's tensor type names and the typed arrays that hold their elements.
const ARRAYS = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,
  int64: BigInt64Array,
  bool: Uint8Array,
};

function readTensor(input) {
  const Array = ARRAYS[input.dtype];
  if (!Array) throw new Error(`input ${input.name}: unsupported dtype ${input.dtype}`);
  const bytes = readFileSync(input.file);
  // A copy into a fresh buffer: typed arrays need their element alignment.
  const data = new Array(new Uint8Array(bytes).buffer);
  return new ort.Tensor(input.dtype, data, input.dims);
}

async function runCase(kase, folder) {
  const session = await ort.InferenceSession.create(kase.model, { executionProviders: ['cpu'] });
  const feeds = {};
  for (const input of kase.inputs) feeds[input.name] = readTensor(input);
  const results = await session.run(feeds);
  const outputs = session.outputNames.map((name, index) => {
    const tensor = results[name];
    const file = join(folder, `${kase.name}.${index}.bin`);
    const view = tensor.data;
    writeFileSync(file, Buffer.from(view.buffer, view.byteOffset, view.byteLength));
    return { name, dtype: tensor.type, dims: tensor.dims, file };
  });
  await session.release();
  return outputs;
}

const manifestPath = process.argv[2];
const manifest = JSON.parse(readFileSync(manifestPath, 'utf8'));
const folder = dirname(manifestPath);
console.log(JSON.stringify({ onnxruntime: ort.env.versions }));
for (const kase of manifest.cases) {
  try {
    console.log(JSON.stringify({ name: kase.name, outputs: await runCase(kase, folder) }));
  } catch (error) {
    console.log(JSON.stringify({ name: kase.name, error: String(error?.message ?? error) }));
  }
}
