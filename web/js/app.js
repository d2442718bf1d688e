// The lab page: sets up the five widgets. Each one asks the server (the JSON API) for every
// number it shows; nothing is computed here but the drawing.
import { setUpResiduals } from './residuals.js';
import { setUpNormalization } from './normalization.js';
import { setUpSteps } from './steps.js';
import { setUpBatchVsLayer } from './batch_vs_layer.js';
import { setUpDeepStacks } from './deep_stacks.js';

const widgets = [setUpResiduals, setUpNormalization, setUpSteps, setUpBatchVsLayer, setUpDeepStacks];
Promise.allSettled(widgets.map((setUp) => setUp())).then(() => {
  document.body.dataset.ready = 'true';
});
