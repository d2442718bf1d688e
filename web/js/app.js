// The lab page: sets up the six widgets. Each one asks the server (the JSON API) for every
// number it shows; the page itself only draws, and sums up what it draws (a ratio of two bars,
// the spread over seeds).
import { setUpResiduals } from './residuals.js';
import { setUpNormalization } from './normalization.js';
import { setUpSteps } from './steps.js';
import { setUpBatchVsLayer } from './batch_vs_layer.js';
import { setUpDeepStacks } from './deep_stacks.js';
import { setUpDepthResults } from './depth_results.js';

const widgets = [setUpResiduals, setUpNormalization, setUpSteps, setUpBatchVsLayer, setUpDeepStacks,
  setUpDepthResults];
Promise.allSettled(widgets.map((setUp) => setUp())).then(() => {
  document.body.dataset.ready = 'true';
});
