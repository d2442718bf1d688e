// Bar charts made of plain elements: one slot per value, heights on a log, linear or signed
// scale. Every bar carries its exact value (data-value) and a description shown on hover; the
// chart is one tab stop, and the arrow keys walk its bars, announcing each value.

export function drawBars(chart, items, options = {}) {
  const scale = options.scale || 'linear';
  const describe = options.describe || ((item) => String(item.value));
  const values = items.map((item) => item.value).filter((v) => Number.isFinite(v));
  let low = 0;
  let high = Math.max(1e-300, ...values.map(Math.abs));
  if (scale === 'log') {
    const positive = values.filter((v) => v > 0);
    low = Math.log10(options.min ?? Math.min(...positive, Infinity));
    high = Math.log10(options.max ?? Math.max(...positive, -Infinity));
    if (!Number.isFinite(low) || !Number.isFinite(high)) { low = 0; high = 1; }
    if (high - low < 1e-9) { low -= 0.5; high += 0.5; }
  } else if (options.max !== undefined) {
    high = options.max;
  }

  chart.replaceChildren();
  chart.tabIndex = 0;
  chart.setAttribute('role', 'group');
  if (options.label) chart.setAttribute('aria-label', `${options.label}: use the arrow keys to read each bar`);
  const tip = document.createElement('div');
  tip.className = 'tip';
  tip.hidden = true;
  tip.setAttribute('aria-live', 'polite');

  const tickEvery = Math.max(1, Math.ceil(items.length / 12));
  const slots = items.map((item, index) => {
    const slot = document.createElement('div');
    slot.className = 'bar-slot';
    const bar = document.createElement('div');
    bar.className = 'bar' + (item.alt ? ' alt' : '');
    const v = item.value;
    bar.dataset.value = String(v);
    if (scale === 'log') {
      const fraction = v > 0 && Number.isFinite(v) ? (Math.log10(v) - low) / (high - low) : 0;
      bar.style.height = `${Math.max(0.5, Math.min(1, fraction) * 100)}%`;
    } else if (scale === 'signed') {
      const fraction = Number.isFinite(v) ? Math.min(1, Math.abs(v) / high) : 0;
      bar.style.height = `${Math.max(0.5, fraction * 50)}%`;
      bar.style.bottom = v < 0 ? `${50 - Math.max(0.5, fraction * 50)}%` : '50%';
      if (v < 0) bar.classList.add('negative');
    } else {
      const fraction = Number.isFinite(v) ? Math.min(1, Math.abs(v) / high) : 0;
      bar.style.height = `${Math.max(0.5, fraction * 100)}%`;
    }
    const text = describe(item, index);
    slot.title = text;
    slot.setAttribute('aria-label', text);
    slot.append(bar);
    if (item.tick !== undefined && (index % tickEvery === 0 || index === items.length - 1)) {
      const tick = document.createElement('span');
      tick.className = 'tick' + (index === 0 || index === items.length - 1 ? ' keep' : '');
      tick.textContent = item.tick;
      slot.append(tick);
    }
    slot.addEventListener('mouseenter', () => show(index));
    slot.addEventListener('mouseleave', () => { tip.hidden = true; slot.classList.remove('active'); });
    chart.append(slot);
    return slot;
  });
  if (scale === 'signed') {
    const zero = document.createElement('div');
    zero.className = 'zero-line';
    chart.append(zero);
  }
  if (options.axis) {
    const top = document.createElement('span');
    top.className = 'axis top';
    top.textContent = options.axis(scale === 'log' ? 10 ** high : high);
    const bottom = document.createElement('span');
    bottom.className = 'axis bottom';
    bottom.textContent = scale === 'log' ? options.axis(10 ** low) : '';
    chart.append(top, bottom);
  }
  chart.append(tip);

  let active = -1;
  function show(index) {
    slots[active]?.classList.remove('active');
    active = index;
    slots[index].classList.add('active');
    tip.textContent = slots[index].title;
    tip.hidden = false;
  }
  chart.onkeydown = (event) => {
    if (!slots.length) return;
    const moves = { ArrowRight: 1, ArrowUp: 1, ArrowLeft: -1, ArrowDown: -1 };
    if (event.key in moves) {
      show(Math.max(0, Math.min(slots.length - 1, (active < 0 ? 0 : active + moves[event.key]))));
    } else if (event.key === 'Home') {
      show(0);
    } else if (event.key === 'End') {
      show(slots.length - 1);
    } else {
      return;
    }
    event.preventDefault();
  };
  chart.onblur = () => { tip.hidden = true; slots[active]?.classList.remove('active'); };
}
