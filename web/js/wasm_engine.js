// The page's engine when it is a static folder (scripts/web-static.sh): the lab's API compiled to
// WebAssembly (wasm/lab_api.cpp), run in Web Workers so the page never freezes. A call takes an
// idle worker or starts one; the module is compiled once and handed to each worker. Aborting a
// call ends its worker, which is how a superseded request or a Stop really stops the work.

let compiled = null;  // Promise<WebAssembly.Module>
const idle = [];
const kMaxIdle = 2;

function wasmModule() {
  compiled ??= (async () => {
    const url = new URL('../wasm/addnorm_lab.wasm', import.meta.url);
    try {
      return await WebAssembly.compileStreaming(fetch(url));
    } catch {
      // A host that serves .wasm without application/wasm: compile from the bytes instead.
      const response = await fetch(url);
      if (!response.ok) throw new Error(`could not load ${url.pathname} (${response.status})`);
      return WebAssembly.compile(await response.arrayBuffer());
    }
  })();
  return compiled;
}

async function takeWorker() {
  if (idle.length) return idle.pop();
  const module = await wasmModule();
  const worker = new Worker(new URL('./wasm_worker.js', import.meta.url), { type: 'module' });
  worker.postMessage({ module });
  return worker;
}

// Runs the API call /api/<name> with `body` in a worker; resolves to {status, body}, the server's
// HTTP status and JSON answer. With `onEvent` it is the training stream (/api/train): each event
// arrives as onEvent(name, data). An aborted `signal` ends the worker and rejects with an
// AbortError.
export async function wasmCall(name, body, signal, onEvent = null) {
  if (signal?.aborted) throw new DOMException('the call was aborted', 'AbortError');
  const worker = await takeWorker();
  return new Promise((resolve, reject) => {
    const abort = () => {
      worker.terminate();
      reject(new DOMException('the call was aborted', 'AbortError'));
    };
    if (signal?.aborted) {
      abort();
      return;
    }
    signal?.addEventListener('abort', abort, { once: true });
    worker.onmessage = ({ data }) => {
      if (data.event) {
        onEvent?.(data.event, JSON.parse(data.data));
        return;
      }
      signal?.removeEventListener('abort', abort);
      if (idle.length < kMaxIdle) idle.push(worker);
      else worker.terminate();
      resolve(data.answer);
    };
    worker.onerror = (event) => {
      signal?.removeEventListener('abort', abort);
      worker.terminate();
      event.preventDefault();
      reject(new Error(`the WebAssembly engine failed: ${event.message || 'out of memory?'}`));
    };
    worker.postMessage({ kind: onEvent ? 'train' : 'call', name, body: JSON.stringify(body) });
  });
}
