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
