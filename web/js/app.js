// The lab page: sets up the widgets. All but one ask the server (the JSON API) for every number
// they show, the diagnosis reads a diagnose file the user chooses; the page itself only draws,
// and sums up what it draws (a ratio of two bars, the spread over seeds).
import { setUpResiduals } from './residuals.js';
import { setUpNormalization } from './normalization.js';
import { setUpSteps } from './steps.js';
import { setUpBatchVsLayer } from './batch_vs_layer.js';
import { setUpDeepStacks } from './deep_stacks.js';
import { setUpRankCollapse } from './rank_collapse.js';
import { setUpDepthResults } from './depth_results.js';
import { setUpDiagnosis } from './diagnosis.js';

const widgets = [setUpResiduals, setUpNormalization, setUpSteps, setUpBatchVsLayer, setUpDeepStacks,
  setUpRankCollapse, setUpDepthResults, setUpDiagnosis];
Promise.allSettled(widgets.map((setUp) => setUp())).then(() => {
  document.body.dataset.ready = 'true';
});
