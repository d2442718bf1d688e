// Section 5's diagram: one transformer block drawn bottom to top, input → sub-layer F (attention
// or the FFN) → Add & Norm, wired either as post-norm, x ← Norm(x + F(x)), or as pre-norm,
// x ← x + F(Norm(x)). A radio group beside it switches the wiring; the SVG is redrawn and its
// accessible name says which wiring it shows. Nothing here asks the API.

const SVG = 'http://www.w3.org/2000/svg';

export const WIRINGS = {
  post_norm: {
    name: 'Post-norm (2017 paper)',
    formula: 'x ← Norm(x + F(x))',
    label: 'Post-norm wiring of one transformer block: the input x goes through the sub-layer F ' +
      '(attention or feed-forward) and, on a skip path, around it; the two are added and the sum ' +
      'is normalised, x ← Norm(x + F(x)). The norm sits on the main path, after the add.',
    caption: 'The skip path ends at the add, and every block\'s output passes through a norm.' +
      ' The gradient to lower blocks must pass through every norm on the way down.',
  },
  pre_norm: {
    name: 'Pre-norm (GPT-2)',
    formula: 'x ← x + F(Norm(x))',
    label: 'Pre-norm wiring of one transformer block: the input x is normalised, goes through ' +
      'the sub-layer F (attention or feed-forward), and the result is added to the unchanged ' +
      'input carried on the skip path, x ← x + F(Norm(x)). The norm sits inside the branch, ' +
      'before F.',
    caption: 'The norm moves inside the branch, so the skip path is a plain identity ' +
      'from the first block to the last, and nothing normalises the stream itself.',
  },
};

function element(name, attributes, text) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

// Layout, in viewBox units (260 × 330): the main path runs up the middle at x = 110, the skip
// path up the right side at x = 225. Boxes are listed bottom to top.
const MID = 110;
const SKIP = 225;
const BOX_W = 150;
const BOX_H = 34;

function box(group, y, text, kind) {
  group.append(element('rect', { x: MID - BOX_W / 2, y: y - BOX_H / 2, width: BOX_W, height: BOX_H, rx: 6, class: `box ${kind}` }));
  group.append(element('text', { x: MID, y: y + 4.5, 'text-anchor': 'middle', class: 'box-text' }, text));
}

function arrow(group, x1, y1, x2, y2, kind = 'wire') {
  group.append(element('line', { x1, y1, x2, y2, class: kind, 'marker-end': 'url(#block-diagram-arrow)' }));
}

function draw(svg, placement) {
  const wiring = WIRINGS[placement];
  svg.replaceChildren();
  svg.append(element('title', { id: 'block-diagram-title' }, `${wiring.name}: ${wiring.formula}`));
  const defs = element('defs', {});
  const marker = element('marker', { id: 'block-diagram-arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' });
  marker.append(element('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow-head' }));
  defs.append(marker);
  svg.append(defs);
  const g = element('g', {});
  svg.append(g);

  const inputY = 312;
  const outputY = 16;
  const addY = placement === 'post_norm' ? 150 : 92;
  const addR = 13;
  // The input and output labels.
  g.append(element('text', { x: MID, y: inputY + 4, 'text-anchor': 'middle', class: 'io-text' }, 'x (block input)'));
  g.append(element('text', { x: MID, y: outputY + 4, 'text-anchor': 'middle', class: 'io-text' }, 'x (to the next block)'));

  if (placement === 'post_norm') {
    // Add & Norm: the add and the norm together, on the main path, after F.
    g.append(element('rect', { x: MID - BOX_W / 2 - 8, y: 64, width: BOX_W + 16, height: 108, rx: 8, class: 'addnorm-frame' }));
    g.append(element('text', { x: MID - BOX_W / 2 - 2, y: 168, class: 'frame-text' }, 'Add & Norm'));
    box(g, 218, 'F: attention or FFN', 'sublayer');
    box(g, 90, 'Norm', 'norm');
    arrow(g, MID, inputY - 10, MID, 218 + BOX_H / 2 + 1);
    arrow(g, MID, 218 - BOX_H / 2, MID, addY + addR + 1);
    arrow(g, MID, addY - addR, MID, 90 + BOX_H / 2 + 1);
    arrow(g, MID, 90 - BOX_H / 2, MID, outputY + 10);
  } else {
    box(g, 250, 'Norm', 'norm');
    box(g, 178, 'F: attention or FFN', 'sublayer');
    arrow(g, MID, inputY - 10, MID, 250 + BOX_H / 2 + 1);
    arrow(g, MID, 250 - BOX_H / 2, MID, 178 + BOX_H / 2 + 1);
    arrow(g, MID, 178 - BOX_H / 2, MID, addY + addR + 1);
    arrow(g, MID, addY - addR, MID, outputY + 10);
    g.append(element('text', { x: MID - addR - 6, y: addY + 4, 'text-anchor': 'end', class: 'frame-text' }, 'Add'));
  }
  // The skip path: from the input, up the right side, into the add.
  const fork = inputY - 26;
  g.append(element('polyline', { points: `${MID},${fork} ${SKIP},${fork} ${SKIP},${addY}`, class: 'wire skip-path' }));
  arrow(g, SKIP, addY, MID + addR + 1, addY, 'wire skip-path');
  g.append(element('circle', { cx: MID, cy: fork, r: 3, class: 'fork' }));
  g.append(element('text', { x: SKIP - 6, y: (fork + addY) / 2, 'text-anchor': 'end', class: 'skip-text' }, 'skip'));
  g.append(element('circle', { cx: MID, cy: addY, r: addR, class: 'add' }));
  g.append(element('text', { x: MID, y: addY + 5.5, 'text-anchor': 'middle', class: 'add-text' }, '+'));

  svg.setAttribute('aria-label', wiring.label);
  svg.dataset.placement = placement;
}

export function setUpBlockDiagram() {
  const svg = document.getElementById('block-diagram');
  const formula = document.getElementById('block-diagram-formula');
  const caption = document.getElementById('block-diagram-caption');
  if (!svg) return Promise.resolve();
  const radios = [...document.querySelectorAll('input[name=diagram-placement]')];
  const update = () => {
    const placement = radios.find((radio) => radio.checked)?.value || 'post_norm';
    draw(svg, placement);
    formula.textContent = `${WIRINGS[placement].name}: ${WIRINGS[placement].formula}`;
    caption.textContent = WIRINGS[placement].caption;
  };
  for (const radio of radios) radio.addEventListener('change', update);
  update();
  return Promise.resolve();
}
