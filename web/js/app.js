// The lab page: sets up the widgets. All but one ask the lab's JSON API (the server's, or its
// WebAssembly build in the static folder) for every number they show, the diagnosis reads a
// diagnose file the user chooses; the page itself only draws, and sums up what it draws (a ratio
// of two bars, the spread over seeds).
import { setUpResiduals } from './residuals.js';
import { setUpNormalization } from './normalization.js';
import { setUpSteps } from './steps.js';
import { setUpBatchVsLayer } from './batch_vs_layer.js';
import { setUpDeepStacks } from './deep_stacks.js';
import { setUpRankCollapse } from './rank_collapse.js';
import { setUpDepthResults } from './depth_results.js';
import { setUpDiagnosis } from './diagnosis.js';
import { setUpBlockDiagram } from './block_diagram.js';
import { ENGINE } from './api.js';
import { applyUrlState, watchUrlState } from './url_state.js';

// The static folder computes in the browser: say so where the page names its engine.
if (ENGINE === 'wasm') {
  document.querySelector('[data-engine=where]').textContent =
    'compiled to WebAssembly and running in this browser tab (no server)';
  document.querySelector('[data-engine=footer]').textContent = 'computed in this browser (WebAssembly)';
}

// Settings from the address (a shared link) before any widget asks for its first answer; then the
// address follows the controls, and every widget gets a Reset button.
applyUrlState();
watchUrlState();

const widgets = [setUpResiduals, setUpNormalization, setUpSteps, setUpBatchVsLayer, setUpBlockDiagram,
  setUpDeepStacks, setUpRankCollapse, setUpDepthResults, setUpDiagnosis];
Promise.allSettled(widgets.map((setUp) => setUp())).then(() => {
  document.body.dataset.ready = 'true';
});
