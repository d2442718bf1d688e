// Number formatting as the seed pages print: 8.62e-04, 3.31, -1.3416.

// Scientific with a two-digit exponent, like NumPy and C's %.2e.
export function sci(value, digits = 2) {
  if (!Number.isFinite(value)) return String(value);
  const [mantissa, exponent] = value.toExponential(digits).split('e');
  const sign = exponent.startsWith('-') ? '-' : '+';
  const magnitude = exponent.replace(/^[-+]/, '').padStart(2, '0');
  return `${mantissa}e${sign}${magnitude}`;
}

// Fixed when the value reads well that way, scientific when it is tiny or huge.
export function num(value, digits = 3) {
  if (value === null || value === undefined) return '—';
  if (!Number.isFinite(value)) return String(value);
  const size = Math.abs(value);
  if (size !== 0 && (size < 1e-3 || size >= 1e5)) return sci(value, digits - 1);
  return fixed(value, digits);
}

// toFixed without "-0.00".
export function fixed(value, digits) {
  const text = value.toFixed(digits);
  return /^-0\.?0*$/.test(text) ? text.slice(1) : text;
}

// A minus sign that reads as one.
export function signed(text) {
  return text.replace(/^-/, '−');
}

// Tick labels in engineering form: at most three significant digits, no float noise
// (0.30000000000000004 prints 0.3), and exponent form beyond 10⁴ either way: 1e-7, 2.5e5; a
// negative value starts with a real minus sign (−0.5). 0 prints 0.
export function compact(value) {
  if (value === null || value === undefined) return '—';
  if (!Number.isFinite(value)) return String(value);
  if (value === 0) return '0';
  const size = Math.abs(value);
  let text;
  if (size < 1e-4 || size > 1e4) {
    const [mantissa, exponent] = value.toExponential(2).split('e');
    text = `${Number(mantissa)}e${Number(exponent)}`;  // toExponential carries: 99950 gives 1e5
  } else {
    text = String(Number(value.toPrecision(3)));
  }
  return text.replace(/^-/, '−');
}
