/**
 * Exponential moving average with bias correction (as in Adam and TensorBoard's
 * "debiased" smoothing): s_t = w·s_{t-1} + (1−w)·x_t with s_0 = 0, reported as
 * s_t / (1 − w^n) where n counts the finite values seen so far. Without the
 * correction the first points would be pulled toward zero.
 *
 * It runs on the full series before any downsampling, so the smoothed curve is the
 * same whatever the chart's resolution.
 */

/**
 * Smooths `values` with weight `w` in [0, 1) (0 = no smoothing). Non-finite or
 * missing values (a null loss) are carried as null and do not advance the average.
 */
export function emaDebiased(values: readonly (number | null)[], w: number): (number | null)[] {
  if (!(w >= 0 && w < 1)) {
    throw new RangeError(`smoothing weight must be in [0, 1), got ${w}`);
  }
  const out: (number | null)[] = new Array(values.length);
  let acc = 0;
  let n = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    if (x === null || !Number.isFinite(x)) {
      out[i] = null;
      continue;
    }
    acc = w * acc + (1 - w) * x;
    n++;
    const correction = 1 - Math.pow(w, n);
    out[i] = correction > 0 ? acc / correction : x;
  }
  return out;
}
