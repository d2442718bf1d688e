// The spread of a measurement over seeds, as the charts draw it: the mean line and the band from
// the lowest to the highest seed. `perSeed[s][i]` is seed s's value at point i; values that are
// not finite (a diverged run) are left out of that point's mean and range.
export function seedSpread(perSeed) {
  const points = Math.max(0, ...perSeed.map((values) => values.length));
  const mean = [];
  const low = [];
  const high = [];
  for (let i = 0; i < points; i++) {
    const finite = perSeed.map((values) => values[i]).filter((v) => Number.isFinite(v));
    mean.push(finite.length ? finite.reduce((sum, v) => sum + v, 0) / finite.length : NaN);
    low.push(finite.length ? Math.min(...finite) : NaN);
    high.push(finite.length ? Math.max(...finite) : NaN);
  }
  return { mean, low, high };
}
