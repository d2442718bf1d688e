// The lab page's layout and accessibility, checked by geometry rather than by eye, at a phone's
// width (390 px), a laptop's (1280 px) and a wide screen's (1920 px): no element wider than its
// card unless it sits in a scrolling box (the tables), no two runs of text drawn over each other,
// slider labels on one line, every control reachable with the Tab key, and no serious or
// critical finding from axe-core. Saves every widget at every width (and the whole page at 1280)
// under $SCREENSHOT_DIR. Run by scripts/browser-tests.sh, which starts `addnorm lab` and sets LAB_URL.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const LAB_URL = process.env.LAB_URL;
if (!LAB_URL) throw new Error('LAB_URL is not set: run scripts/browser-tests.sh');
const SCREENSHOTS = process.env.SCREENSHOT_DIR || 'screenshots';
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');
const WIDTHS = [390, 1280, 1920];
const SECTIONS = ['residuals', 'normalization', 'steps', 'batch-vs-layer', 'deep-stacks', 'depth-results'];
mkdirSync(SCREENSHOTS, { recursive: true });

let browser;
let page;

// One page, loaded once and then resized: the charts redraw for their new width, as they do
// when a reader turns a phone or resizes a window.
before(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  const errors = [];
  page.on('pageerror', (error) => errors.push(String(error)));
  await page.goto(LAB_URL);
  await page.waitForSelector('body[data-ready=true]', { timeout: 60000 });
  await page.waitForSelector('#depth-results[data-state=done]', { timeout: 60000 });
  assert.deepEqual(errors, [], 'page errors');
});

async function atWidth(width) {
  await page.setViewportSize({ width, height: 900 });
  // Two frames: the resize observers redraw the charts before the second one paints.
  await page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))));
  return page;
}

after(async () => {
  await browser?.close();
});

// Everything the geometry checks measure, computed in the page.
function measureLayout() {
  const seen = new Map();  // element -> visible, so each ancestor's style is read once
  const visible = (element) => {
    if (!element) return true;
    if (seen.has(element)) return seen.get(element);
    const style = getComputedStyle(element);
    const shown = !(element.hidden || style.display === 'none' || style.visibility === 'hidden' ||
      element.classList?.contains('visually-hidden') || element.classList?.contains('tip')) && visible(element.parentElement);
    seen.set(element, shown);
    return shown;
  };
  // The nearest ancestor (below `stop`) that scrolls sideways: what it holds may be wider.
  const clips = new Map();  // element -> whether it clips or scrolls sideways
  const scroller = (element, stop) => {
    for (let e = element.parentElement; e && e !== stop; e = e.parentElement) {
      if (!clips.has(e)) clips.set(e, ['auto', 'scroll', 'hidden'].includes(getComputedStyle(e).overflowX));
      if (clips.get(e)) return e;
    }
    return null;
  };
  const describe = (element) => {
    const text = (element.textContent || '').trim().slice(0, 40);
    return `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ''}${element.className?.baseVal ?? (element.className ? `.${element.className}` : '')} "${text}"`;
  };

  const widerThanCard = [];
  for (const card of document.querySelectorAll('main section')) {
    const box = card.getBoundingClientRect();
    for (const element of card.querySelectorAll('*')) {
      if (!visible(element) || scroller(element, card)) continue;
      const r = element.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1) {
        widerThanCard.push(`${card.id}: ${describe(element)} spans ${r.left.toFixed(0)}..${r.right.toFixed(0)}, the card ${box.left.toFixed(0)}..${box.right.toFixed(0)}`);
      }
    }
  }

  // Every run of text on screen, one box per line: text nodes through a Range, SVG text by element.
  const boxes = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!node.textContent.trim() || !parent || !visible(parent)) continue;
    if (parent.closest('svg, select, option, script, style')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const clip = scroller(parent, null)?.getBoundingClientRect();
    for (const r of range.getClientRects()) {
      if (r.width < 1 || r.height < 1) continue;
      if (clip && (r.right <= clip.left || r.left >= clip.right)) continue;  // scrolled out of view
      boxes.push({ r, what: `"${node.textContent.trim().slice(0, 30)}" in ${describe(parent)}` });
    }
  }
  for (const text of document.querySelectorAll('svg text')) {
    if (!visible(text) || !text.textContent.trim()) continue;
    boxes.push({ r: text.getBoundingClientRect(), what: `chart text "${text.textContent}" in #${text.closest('[id]')?.id}` });
  }
  const overlaps = [];
  const slack = 1;  // glyph boxes of neighbouring lines may touch
  // A sweep from the top: only boxes that start before this one ends can overlap it.
  boxes.sort((a, b) => a.r.top - b.r.top);
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length && boxes[j].r.top < boxes[i].r.bottom; j++) {
      const a = boxes[i].r;
      const b = boxes[j].r;
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > slack && h > slack + 1) overlaps.push(`${boxes[i].what} overlaps ${boxes[j].what}`);
    }
  }

  // A slider's name and value stay on one line (no "σ" with its subscript alone below).
  const brokenLabels = [...document.querySelectorAll('.slider-label')].filter((label) => {
    const lineHeight = parseFloat(getComputedStyle(label).fontSize) * 1.9;
    return label.getBoundingClientRect().height > lineHeight;
  }).map((label) => label.textContent.trim());

  const charts = [...document.querySelectorAll('.chart')].map((chart) => ({
    id: chart.id, svg: chart.querySelector('svg')?.getBoundingClientRect().width, box: chart.getBoundingClientRect().width,
  }));
  return {
    overflow: document.documentElement.scrollWidth - window.innerWidth,
    widerThanCard, overlaps, brokenLabels, charts, texts: boxes.length,
  };
}

for (const width of WIDTHS) {
  test(`layout at ${width} px: nothing wider than its card, no overlapping text, labels on one line`, async () => {
    await atWidth(width);
    const layout = await page.evaluate(measureLayout);
    assert.ok(layout.texts > 200, `only ${layout.texts} runs of text found`);
    assert.ok(layout.overflow <= 1, `the page is ${layout.overflow}px wider than the window`);
    assert.deepEqual(layout.widerThanCard, []);
    assert.deepEqual(layout.overlaps, []);
    assert.deepEqual(layout.brokenLabels, []);
    for (const chart of layout.charts) {
      assert.ok(chart.svg <= chart.box + 1, `${chart.id}: drawn ${chart.svg}px wide in a ${chart.box}px box`);
    }
    // The tables that may be wider than a phone scroll inside their own box.
    const tables = await page.$$eval('main table', (all) => all.map((table) => {
      const wrap = table.closest('.table-wrap');
      return { id: table.id, wrapped: Boolean(wrap), scrolls: wrap ? getComputedStyle(wrap).overflowX : '' };
    }));
    for (const table of tables) assert.ok(table.wrapped && table.scrolls === 'auto', `${table.id} is not in a scrolling box`);

    if (width === 1280) await page.screenshot({ path: join(SCREENSHOTS, `lab-${width}.png`), fullPage: true });
    for (const id of SECTIONS) {
      await page.locator(`#${id}`).screenshot({ path: join(SCREENSHOTS, `${id}-${width}.png`) });
    }
  });
}

test('axe-core finds nothing serious or critical, at 1280 px and at 390 px', async () => {
  await page.addScriptTag({ path: AXE });
  for (const width of [1280, 390]) {
    await atWidth(width);
    const violations = await page.evaluate(async () => {
      const result = await window.axe.run(document, { resultTypes: ['violations'] });
      return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
        .map((v) => `${v.id} (${v.impact}): ${v.help}; ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')}`);
    });
    assert.deepEqual(violations, [], `at ${width} px`);
  }
});

test('the Tab key reaches every control, and each has a name', async () => {
  await atWidth(1280);
  const controls = await page.$$eval('main input, main select, main button, main [tabindex="0"]', (all) => all
    .filter((c) => !c.disabled && c.offsetParent !== null && !(c.type === 'radio' && !c.checked) && c.tabIndex >= 0)
    .map((c) => c.id || c.getAttribute('aria-label') || c.textContent.trim()));
  await page.locator('.skip').focus();
  const reached = new Set();
  for (let i = 0; i < controls.length + 40; i++) {
    await page.keyboard.press('Tab');
    const focused = await page.evaluate(() => {
      const c = document.activeElement;
      return c && c !== document.body ? (c.id || c.getAttribute('aria-label') || c.textContent.trim()) : null;
    });
    if (focused === null || focused === 'API info') break;
    reached.add(focused);
  }
  const missed = controls.filter((c) => !reached.has(c));
  assert.deepEqual(missed, []);
  const unnamed = await page.$$eval('input, select, button, [role=group], [role=tab]', (all) => all
    .filter((c) => !(c.labels?.length || c.getAttribute('aria-label') || c.getAttribute('aria-labelledby') || c.textContent.trim()))
    .map((c) => c.outerHTML.slice(0, 80)));
  assert.deepEqual(unnamed, []);
});
