// A short load test of `addnorm lab` on 127.0.0.1: the widgets' requests at their largest
// settings, first with the server idle, then while a training run streams, bounded in count
// (40 requests per endpoint and phase) and time (60 s). It shows that the server keeps answering
// during training and measures the latencies docs/web-lab.md reports; they are written to
// $SCREENSHOT_DIR/../load-test.json. Only the idle median is held to the 50 ms goal: a shared
// 2-core CI machine running a training on both cores cannot promise more.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join, dirname } from 'node:path';

const LAB_URL = process.env.LAB_URL;
if (!LAB_URL) throw new Error('LAB_URL is not set: run scripts/browser-tests.sh');
const OUT = join(dirname(process.env.SCREENSHOT_DIR || 'screenshots/x'), 'load-test.json');
const REQUESTS = 40;
const deadline = AbortSignal.timeout(60000);

// What each widget sends at its largest setting.
const range = (n, f) => Array.from({ length: n }, (_, i) => f(i));
const WIDGETS = {
  '1 residuals (50 layers)': ['/api/gradient-flow', { depths: [6, 24, 50], weight_std: 0.5, spread_seeds: 0 }],
  '2 normalization (50 layers)': ['/api/activation-growth', { layers: 50, gain: 2, modes: ['pre_norm'], spread_seeds: 0 }],
  '3 steps (4096 values)': ['/api/norm-steps', { x: range(4096, (i) => Math.sin(i) * 100), gamma: [3], beta: [-3], norm: 'layer_norm', eps: 0 }],
  '4 batch vs layer (64 rows, 32 sentences of 16)': ['/api/batch-vs-layer', {
    table: range(64 * 3, (i) => 1000 + (i * 37) % 101),
    table_columns: 3,
    lengths: range(32, () => 16),
    batch_sizes: [1, 2, 4, 8, 16, 32],
    running_batches: 128,
  }],
};

async function timed(path, body) {
  const started = performance.now();
  const response = await fetch(new URL(path, LAB_URL), {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: deadline,
  });
  const text = await response.text();
  return { status: response.status, ms: performance.now() - started, text };
}

function summary(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { n: sorted.length, p50: at(0.5), p95: at(0.95), max: sorted.at(-1) };
}

async function measure() {
  const result = {};
  for (const [name, [path, body]] of Object.entries(WIDGETS)) {
    const samples = [];
    for (let i = 0; i < REQUESTS; i++) {
      const { status, ms, text } = await timed(path, body);
      assert.equal(status, 200, `${name}: HTTP ${status} ${text.slice(0, 200)}`);
      samples.push(ms);
    }
    result[name] = summary(samples);
  }
  return result;
}

// Starts a training stream; resolves `started` at the first step, counts steps as they come.
function startTraining() {
  const state = { steps: 0, ended: null };
  const controller = new AbortController();
  let markStarted;
  const started = new Promise((resolve) => { markStarted = resolve; });
  const done = (async () => {
    const response = await fetch(new URL('/api/train', LAB_URL), {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ placements: ['post_norm', 'pre_norm'], depths: [6], steps: 2000, warmups: [false], seeds: 1 }),
      signal: controller.signal,
    });
    assert.equal(response.status, 200);
    const decoder = new TextDecoder();
    try {
      for await (const chunk of response.body) {
        const text = decoder.decode(chunk, { stream: true });
        const steps = text.match(/event: step/g)?.length || 0;
        state.steps += steps;
        if (steps) markStarted();
        const end = text.match(/event: (done|stopped)/);
        if (end) state.ended = end[1];
      }
    } catch (error) {
      if (error.name !== 'AbortError') throw error;
    }
  })();
  return { state, started, done, controller };
}

test('the server answers every widget fast, and keeps answering while a training streams', async () => {
  const idle = await measure();
  const training = startTraining();
  await training.started;
  const stepsBefore = training.state.steps;
  const underTraining = await measure();
  const stepsDuring = training.state.steps - stepsBefore;
  // Stop the run through the API, as the page's button does, and see the stream end.
  const jobs = await (await fetch(new URL('/api/jobs', LAB_URL))).json();
  for (const job of jobs.jobs) {
    await fetch(new URL('/api/jobs/stop', LAB_URL), {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ job: job.id }),
    });
  }
  await training.done;

  const rows = Object.keys(WIDGETS).map((name) => ({ widget: name, idle: idle[name], during_training: underTraining[name] }));
  writeFileSync(OUT, JSON.stringify({ requests_per_endpoint_and_phase: REQUESTS, training_steps_during_load: stepsDuring, rows }, null, 2));
  const f = (s) => `p50 ${s.p50.toFixed(1)} ms, p95 ${s.p95.toFixed(1)} ms, max ${s.max.toFixed(1)} ms`;
  for (const row of rows) {
    console.log(`${row.widget}\n  idle:            ${f(row.idle)}\n  during training: ${f(row.during_training)}`);
  }
  console.log(`training steps streamed during the load: ${stepsDuring}; the run ended: ${training.state.ended}`);

  assert.ok(stepsDuring > 0, 'the training stream made no progress while the widgets were asked');
  assert.equal(training.state.ended, 'stopped');
  for (const row of rows) {
    assert.ok(row.idle.p50 < 50, `${row.widget}: idle median ${row.idle.p50.toFixed(1)} ms, expected under 50 ms`);
  }
});
