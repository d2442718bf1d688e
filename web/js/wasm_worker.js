// A Web Worker that holds one instance of the lab's WebAssembly engine (wasm/lab_api.cpp) and
// answers the page's calls one at a time: {kind: 'call', name, body} → {answer}; {kind: 'train',
// body} → {event, data} per training event, then {answer}. The first message hands it the
// compiled module (web/js/wasm_engine.js).
import createAddnormLab from '../wasm/addnorm_lab.js';

let engine = null;

function run(lab, exported, args) {
  const pointer = lab.ccall(exported, 'number', args.map(() => 'string'), args);
  const text = lab.UTF8ToString(pointer);
  lab.ccall('addnorm_free', null, ['number'], [pointer]);
  return JSON.parse(text);
}

self.onmessage = async ({ data }) => {
  if (data.module) {
    engine = createAddnormLab({
      instantiateWasm(imports, done) {
        WebAssembly.instantiate(data.module, imports).then((instance) => done(instance));
        return {};
      },
    });
    return;
  }
  const lab = await engine;
  if (data.kind === 'train') {
    globalThis.addnormEvent = (event, json) => self.postMessage({ event, data: json });
    self.postMessage({ answer: run(lab, 'addnorm_lab_train', [data.body]) });
  } else {
    self.postMessage({ answer: run(lab, 'addnorm_lab_call', [data.name, data.body]) });
  }
};
