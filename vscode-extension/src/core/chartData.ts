/**
 * The data of the panel's loss chart: the shown loop's raw and smoothed loss, plus
 * the smoothed curves of the runs ticked for comparison, on one shared x axis (the
 * union of the steps each curve kept after downsampling), as uPlot wants it.
 */

import { lossChart } from "./downsample";
import type { LoopRecord } from "./runModel";

/** Aligned series: every array has the length of `x`; null where a curve has no point. */
export interface ComparisonChart {
  x: number[];
  raw: (number | null)[];
  smooth: (number | null)[];
  /** Smoothed curves of the compared runs, in the order given. */
  compared: { id: string; smooth: (number | null)[] }[];
  /** Whether every loss drawn is positive, so a log scale can show them all. */
  logScaleOk: boolean;
}

/** Builds the chart of `main` compared with `others` (each run's loop to draw). */
export function comparisonChart(
  main: LoopRecord,
  others: { id: string; loop: LoopRecord }[],
  weight: number,
  maxPoints: number,
): ComparisonChart {
  const m = lossChart(main.steps, main.losses, weight, maxPoints);
  const curves = others.map((o) => ({ id: o.id, c: lossChart(o.loop.steps, o.loop.losses, weight, maxPoints) }));
  const xs = new Set<number>(m.x);
  for (const { c } of curves) {
    c.x.forEach((x) => xs.add(x));
  }
  const x = [...xs].sort((a, b) => a - b);
  const align = (keys: number[], values: (number | null)[]) => {
    const byX = new Map(keys.map((k, i) => [k, values[i]]));
    return x.map((v) => byX.get(v) ?? null);
  };
  const positive = (l: LoopRecord) => l.losses.every((v) => v === null || v > 0);
  return {
    x,
    raw: align(m.x, m.raw),
    smooth: align(m.x, m.smooth),
    compared: curves.map(({ id, c }) => ({ id, smooth: align(c.x, c.smooth) })),
    logScaleOk: positive(main) && others.every((o) => positive(o.loop)),
  };
}
