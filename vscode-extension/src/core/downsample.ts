/**
 * Downsampling a chart series to a bounded number of points with
 * Largest-Triangle-Three-Buckets (Steinarsson 2013): keeps the first and last
 * points and, per bucket, the point forming the largest triangle with the
 * previous kept point and the next bucket's average. Peaks and dips survive,
 * unlike plain striding.
 */

import { emaDebiased } from "./smoothing";

/**
 * Indices (ascending) of at most `threshold` points of the series (xs[i], ys[i])
 * chosen by LTTB. Points whose y is null are never chosen, except that a series
 * with fewer finite points than `threshold` keeps every index.
 */
export function lttbIndices(xs: readonly number[], ys: readonly (number | null)[], threshold: number): number[] {
  const finite: number[] = [];
  for (let i = 0; i < ys.length; i++) {
    const y = ys[i];
    if (y !== null && Number.isFinite(y)) {
      finite.push(i);
    }
  }
  if (threshold >= finite.length) {
    return finite;
  }
  if (threshold < 3) {
    return [finite[0], finite[finite.length - 1]].slice(0, Math.max(0, threshold));
  }
  const out: number[] = [finite[0]];
  const bucket = (finite.length - 2) / (threshold - 2);
  let a = finite[0];
  for (let b = 0; b < threshold - 2; b++) {
    const from = Math.floor(b * bucket) + 1;
    const to = Math.min(Math.floor((b + 1) * bucket) + 1, finite.length - 1);
    // Average of the next bucket (the last point for the final bucket).
    const nFrom = to;
    const nTo = Math.min(Math.floor((b + 2) * bucket) + 1, finite.length);
    let avgX = 0;
    let avgY = 0;
    const count = Math.max(1, nTo - nFrom);
    for (let k = nFrom; k < nFrom + count && k < finite.length; k++) {
      avgX += xs[finite[k]];
      avgY += ys[finite[k]] as number;
    }
    avgX /= count;
    avgY /= count;
    let best = -1;
    let bestArea = -1;
    const ax = xs[a];
    const ay = ys[a] as number;
    for (let k = from; k < to; k++) {
      const i = finite[k];
      const area = Math.abs((ax - avgX) * ((ys[i] as number) - ay) - (ax - xs[i]) * (avgY - ay));
      if (area > bestArea) {
        bestArea = area;
        best = i;
      }
    }
    if (best >= 0) {
      out.push(best);
      a = best;
    }
  }
  out.push(finite[finite.length - 1]);
  return out;
}

/** A loss curve ready to draw: raw and smoothed values on shared x positions. */
export interface ChartSeries {
  x: number[];
  raw: (number | null)[];
  smooth: (number | null)[];
}

/**
 * The chart data of one loss curve: smoothing runs on the full series first, then
 * both curves are sampled at the LTTB indices of the raw one (at most `maxPoints`).
 */
export function lossChart(
  steps: readonly number[],
  losses: readonly (number | null)[],
  weight: number,
  maxPoints: number,
): ChartSeries {
  const smoothed = emaDebiased(losses, weight);
  const idx = lttbIndices(steps, losses, maxPoints);
  return {
    x: idx.map((i) => steps[i]),
    raw: idx.map((i) => losses[i]),
    smooth: idx.map((i) => smoothed[i]),
  };
}
