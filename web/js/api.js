// Talking to the lab's JSON API (docs/web-lab.md). Every widget asks through a requester, which
// cancels the widget's previous request when a new one starts, so a fast slider never shows a
// stale answer after a fresh one. The API is the lab server's (`addnorm lab`) or, in the static
// folder of scripts/web-static.sh, the same API compiled to WebAssembly and run in the browser
// (wasm_engine.js): index.html's <meta name="addnorm-engine"> says which.
import { wasmCall } from './wasm_engine.js';

export const ENGINE = globalThis.document?.querySelector('meta[name="addnorm-engine"]')?.content === 'wasm' ? 'wasm' : 'server';

export class ApiError extends Error {
  constructor(message, parameter, status) {
    super(message);
    this.parameter = parameter;
    this.status = status;
  }
}

// An error answer, the server's or the engine's (its JSON body and HTTP status), as an ApiError.
function errorOf(answer, status) {
  return new ApiError(answer.error, answer.parameter, status);
}

// The WebAssembly engine's answer to POST `path` (streaming its events to onEvent, when given):
// the answer's body, or an ApiError for an error status.
async function wasmAnswer(path, body, signal, onEvent) {
  const answer = await wasmCall(path.replace(/^\/api\//, ''), body, signal, onEvent);
  if (answer.status !== 200) throw errorOf(answer.body, answer.status);
  return answer.body;
}

// POSTs `body` as JSON to the lab server.
function postToServer(path, body, signal) {
  return fetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
}

// POSTs `body` as JSON to `path`; resolves to {data, ms}. Throws ApiError for an error answer.
export async function postJson(path, body, signal) {
  const started = performance.now();
  if (ENGINE === 'wasm') {
    const data = await wasmAnswer(path, body, signal);
    return { data, ms: performance.now() - started };
  }
  const response = await postToServer(path, body, signal);
  let data;
  try {
    data = await response.json();
  } catch {
    throw new ApiError(`the server answered ${response.status} without JSON`, null, response.status);
  }
  if (!response.ok) throw errorOf(data, response.status);
  return { data, ms: performance.now() - started };
}

// A function like postJson that aborts its own previous call; a superseded call resolves to null.
export function requester() {
  let controller = null;
  return async (path, body) => {
    controller?.abort();
    const mine = new AbortController();
    controller = mine;
    try {
      const result = await postJson(path, body, mine.signal);
      return controller === mine ? result : null;
    } catch (error) {
      if (error.name === 'AbortError' || controller !== mine) return null;
      throw error;
    }
  };
}

// Shows an API error in a widget: the message, and the control of the parameter it names marked
// invalid. `controls` maps parameter names to input elements.
export function showError(box, error, controls = {}) {
  for (const control of Object.values(controls)) control.removeAttribute('aria-invalid');
  if (!error) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  box.hidden = false;
  box.textContent = error.parameter ? `${error.parameter}: ${error.message}` : error.message;
  controls[error.parameter]?.setAttribute('aria-invalid', 'true');
}

// Marks a widget as updated: tests and curious users can read how fast the server answered.
export function markUpdated(section, ms) {
  section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
  section.dataset.ms = ms.toFixed(2);
}

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

// POSTs `body` to a streaming endpoint (/api/train) and calls onEvent(name, data) for each of its
// events until the stream ends; throws ApiError when the request is refused, an AbortError when
// `signal` aborts it.
export async function streamEvents(path, body, signal, onEvent) {
  if (ENGINE === 'wasm') {
    await wasmAnswer(path, body, signal, onEvent);
    return;
  }
  const response = await postToServer(path, body, signal);
  if (!response.ok) throw errorOf(await response.json(), response.status);
  await readEvents(response, onEvent);
}
