// Widget settings in the page's address, so that a link reproduces a view, and a Reset button per
// widget that puts its controls back to the page's defaults.
//
// The scheme: one query parameter per control that differs from its default in index.html,
//   ?<key>=<value>&…      e.g. ?residual-layers=24&residual-mode=without&steps-x=1,2,3
// - <key> is the control's id in index.html, or for a group of radio buttons or check boxes their
//   common name (residual-mode, steps-norm, train-placement): unique on the page, and stable as
//   widgets gain controls, so an old link keeps its meaning.
// - <value>: a text field's text, a slider's number, a select's option value, the checked radio
//   button's value, the values of the checked boxes of a group joined by commas (empty: none), or
//   1 / 0 for a single check box.
// The same pairs are read from the fragment as well (#steps-x=1,2,3), for links whose query a
// server would drop; the query wins where both name a control. Values a control cannot take
// (a select's unknown option, a number out of a slider's range, which the slider clamps) are
// ignored or clamped; the widget then validates the rest as if a person had typed it.
// Controls without an id or name (the house table's cells, which the widget builds) and file
// choosers are not in the address. Parameters this module does not know are kept as they are.

const SKIP_TYPES = new Set(['file', 'button', 'submit', 'reset', 'image', 'hidden']);
// What else a section's Reset puts back: the house table of widget 4 has its own button.
const ALSO_CLICK = { 'batch-vs-layer': '#bvl-reset' };

// The widget sections and, in each, its controls: [{section, controls: [{key, elements, kind}]}].
function describeSections() {
  const sections = [];
  for (const section of document.querySelectorAll('main section[id]')) {
    const groups = new Map();  // key (id, or a group's name) -> elements
    for (const element of section.querySelectorAll('input, select, textarea')) {
      if (element.closest('table') || SKIP_TYPES.has(element.type)) continue;
      const grouped = (element.type === 'radio' || element.type === 'checkbox') && element.name;
      const name = grouped ? element.name : element.id;
      if (!name) continue;
      if (!groups.has(name)) groups.set(name, []);
      groups.get(name).push(element);
    }
    const controls = [...groups].map(([name, elements]) => {
      const first = elements[0];
      let kind = 'value';
      if (first.type === 'radio') kind = 'radio';
      else if (first.type === 'checkbox') kind = first.name === name ? 'checks' : 'check';
      return { key: name, elements, kind };
    });
    if (controls.length) sections.push({ section, controls });
  }
  return sections;
}

// The settings in the address: Map key -> value (the fragment's, then the query's).
function readAddress() {
  const pairs = new Map();
  const hash = location.hash.slice(1);
  if (hash.includes('=')) for (const [k, v] of new URLSearchParams(hash)) pairs.set(k, v);
  for (const [k, v] of new URLSearchParams(location.search)) pairs.set(k, v);
  return pairs;
}

function currentValue(control) {
  const { elements, kind } = control;
  if (kind === 'radio') return elements.find((e) => e.checked)?.value ?? '';
  if (kind === 'checks') return elements.filter((e) => e.checked).map((e) => e.value).join(',');
  if (kind === 'check') return elements[0].checked ? '1' : '0';
  return elements[0].value;
}

function defaultValue(control) {
  const { elements, kind } = control;
  if (kind === 'radio') return elements.find((e) => e.defaultChecked)?.value ?? '';
  if (kind === 'checks') return elements.filter((e) => e.defaultChecked).map((e) => e.value).join(',');
  if (kind === 'check') return elements[0].defaultChecked ? '1' : '0';
  const element = elements[0];
  if (element.tagName === 'SELECT') {
    const options = [...element.options];
    return (options.find((o) => o.defaultSelected) ?? options[0])?.value ?? '';
  }
  return element.defaultValue;
}

// Sets a control to `value`; returns the elements that changed (to fire their events), or null
// when the control cannot take the value.
function setValue(control, value) {
  const { elements, kind } = control;
  const changed = [];
  if (kind === 'radio') {
    const target = elements.find((e) => e.value === value);
    if (!target) return null;
    if (!target.checked) { target.checked = true; changed.push(target); }
    return changed;
  }
  if (kind === 'checks' || kind === 'check') {
    const wanted = kind === 'check' ? null : new Set(value === '' ? [] : value.split(','));
    if (kind === 'check' && !['1', '0', 'true', 'false'].includes(value)) return null;
    for (const e of elements) {
      const on = kind === 'check' ? value === '1' || value === 'true' : wanted.has(e.value);
      if (e.checked !== on) { e.checked = on; changed.push(e); }
    }
    return changed;
  }
  const element = elements[0];
  if (element.tagName === 'SELECT' && ![...element.options].some((o) => o.value === value)) return null;
  if ((element.type === 'range' || element.type === 'number') && (value.trim() === '' || !Number.isFinite(Number(value)))) return null;
  if (element.value !== value) {
    element.value = value;  // a slider clamps the value to its range and step itself
    changed.push(element);
  }
  updateOutput(element);
  return changed;
}

// A slider's <output> shows its value as the page first wrote it (as many decimals); the widgets
// rewrite it when they draw, but some only when the slider moves.
function updateOutput(element) {
  if (!element.id || (element.type !== 'range' && element.type !== 'number')) return;
  for (const output of document.querySelectorAll('output')) {
    if (!output.htmlFor.contains(element.id)) continue;
    if (output.dataset.decimals === undefined) {
      output.dataset.decimals = String((output.textContent.split('.')[1] || '').length);
    }
    output.textContent = Number(element.value).toFixed(Number(output.dataset.decimals));
  }
}

function fire(elements) {
  for (const element of elements) {
    element.dispatchEvent(new Event('input', { bubbles: true }));
    element.dispatchEvent(new Event('change', { bubbles: true }));
  }
}

let described = null;

// Sets the controls to the settings in the address. Call before the widgets set up: their first
// request then already asks for what the link describes.
export function applyUrlState() {
  described = describeSections();
  const pairs = readAddress();
  for (const { controls } of described) {
    for (const control of controls) {
      const value = pairs.get(control.key);
      if (value !== undefined) setValue(control, value);
    }
  }
}

// The address for the controls as they are now: only what differs from the defaults.
function writeAddress() {
  const known = new Set();
  const params = [];
  for (const { controls } of described) {
    for (const control of controls) {
      known.add(control.key);
      const value = currentValue(control);
      if (value !== defaultValue(control)) params.push([control.key, value]);
    }
  }
  for (const [k, v] of new URLSearchParams(location.search)) if (!known.has(k)) params.push([k, v]);
  // Readable links: commas and spaces stay as they are typed where a query allows them.
  const encode = (text) => encodeURIComponent(text).replace(/%2C/gi, ',').replace(/%20/g, '+');
  const query = params.map(([k, v]) => `${encode(k)}=${encode(v)}`).join('&');
  const hash = location.hash.includes('=') ? '' : location.hash;
  const url = `${location.pathname}${query ? `?${query}` : ''}${hash}`;
  if (url !== `${location.pathname}${location.search}${location.hash}`) history.replaceState(history.state, '', url);
}

// The name a section goes by in the page's table of contents ("Residuals"), or its heading.
function sectionName(section) {
  const link = document.querySelector(`nav a[href="#${section.id}"]`);
  const source = link ?? section.querySelector('h2');
  const copy = source.cloneNode(true);
  copy.querySelectorAll('.number').forEach((n) => n.remove());
  return copy.textContent.replace(/\s+/g, ' ').trim();
}

// Keeps the address in step with the controls, and gives every widget a Reset button.
export function watchUrlState() {
  if (!described) described = describeSections();
  let timer = null;
  const later = () => {
    // After the widget's own handlers (a preset button sets its fields without an event), and
    // once per burst: browsers throttle a page that replaces its address on every slider step.
    clearTimeout(timer);
    timer = setTimeout(writeAddress, 150);
  };
  for (const { section, controls } of described) {
    for (const type of ['input', 'change', 'click']) section.addEventListener(type, later);

    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'reset-widget';
    button.id = `reset-${section.id}`;
    button.textContent = 'Reset';
    button.setAttribute('aria-label', `Reset ${sectionName(section)}`);
    button.title = 'Back to the page\'s settings for this widget';
    button.addEventListener('click', () => {
      const changed = controls.flatMap((control) => setValue(control, defaultValue(control)) ?? []);
      fire(changed);
      const also = ALSO_CLICK[section.id] && section.querySelector(ALSO_CLICK[section.id]);
      if (also && !also.disabled) also.click();
      later();
    });
    const place = section.querySelector('.controls');
    place.append(button);
  }
}
