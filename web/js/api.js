// Talking to the lab's JSON API (docs/web-lab.md). Every widget asks through a requester, which
// cancels the widget's previous request when a new one starts, so a fast slider never shows a
// stale answer after a fresh one.

export class ApiError extends Error {
  constructor(message, parameter, status) {
    super(message);
    this.parameter = parameter;
    this.status = status;
  }
}

// POSTs `body` as JSON to `path`; resolves to {data, ms}. Throws ApiError for an error answer.
export async function postJson(path, body, signal) {
  const started = performance.now();
  const response = await fetch(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
    signal,
  });
  let data;
  try {
    data = await response.json();
  } catch {
    throw new ApiError(`the server answered ${response.status} without JSON`, null, response.status);
  }
  if (!response.ok) throw new ApiError(data.error, data.parameter, response.status);
  return { data, ms: performance.now() - started };
}

// A function like postJson that aborts its own previous call; a superseded call resolves to null.
export function requester() {
  let controller = null;
  return async (path, body) => {
    controller?.abort();
    const mine = new AbortController();
    controller = mine;
    try {
      const result = await postJson(path, body, mine.signal);
      return controller === mine ? result : null;
    } catch (error) {
      if (error.name === 'AbortError' || controller !== mine) return null;
      throw error;
    }
  };
}

// Shows an API error in a widget: the message, and the control of the parameter it names marked
// invalid. `controls` maps parameter names to input elements.
export function showError(box, error, controls = {}) {
  for (const control of Object.values(controls)) control.removeAttribute('aria-invalid');
  if (!error) {
    box.hidden = true;
    box.textContent = '';
    return;
  }
  box.hidden = false;
  box.textContent = error.parameter ? `${error.parameter}: ${error.message}` : error.message;
  controls[error.parameter]?.setAttribute('aria-invalid', 'true');
}

// Marks a widget as updated: tests and curious users can read how fast the server answered.
export function markUpdated(section, ms) {
  section.dataset.updates = String(Number(section.dataset.updates || 0) + 1);
  section.dataset.ms = ms.toFixed(2);
}
