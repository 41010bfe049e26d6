import { describe, expect, it } from "vitest";
import { comparisonChart } from "../src/core/chartData";
import type { LoopRecord } from "../src/core/runModel";

const loop = (steps: number[], losses: (number | null)[]): LoopRecord => ({
  loop: 0, depth: 1, total: steps[steps.length - 1] ?? 0, steps, losses, lastLr: null, lastStepMs: 0, itemsPerS: null, firstTime: 0, lastTime: 0, measured: null,
});

describe("comparisonChart", () => {
  it("aligns compared runs on the union of steps, null where a curve has no point", () => {
    const main = loop([1, 3, 5], [3, 2, 1]);
    const other = loop([1, 2, 5, 7], [4, 3, 2, 1]);
    const c = comparisonChart(main, [{ id: "r2", loop: other }], 0, 100);
    expect(c.x).toEqual([1, 2, 3, 5, 7]);
    expect(c.raw).toEqual([3, null, 2, 1, null]);
    expect(c.smooth).toEqual([3, null, 2, 1, null]); // weight 0: no smoothing
    expect(c.compared).toEqual([{ id: "r2", smooth: [4, 3, null, 2, 1] }]);
    expect(c.logScaleOk).toBe(true);
  });

  it("smooths each curve on its own full series", () => {
    const main = loop([1, 2, 3, 4], [8, 0.5, 8, 0.5]);
    const c = comparisonChart(main, [], 0.5, 100);
    // Bias-corrected EMA with w = 0.5 of 8, 0.5: (0.5·0.5·8 + 0.5·0.5)/(1 − 0.25) = 3.
    expect(c.smooth[1]).toBeCloseTo(3, 12);
  });

  it("refuses the log scale when any drawn loss is zero or negative", () => {
    const main = loop([1, 2], [1, 0.5]);
    expect(comparisonChart(main, [{ id: "z", loop: loop([1, 2], [1, 0]) }], 0, 10).logScaleOk).toBe(false);
    expect(comparisonChart(loop([1, 2], [1, -1]), [], 0, 10).logScaleOk).toBe(false);
    expect(comparisonChart(loop([1, 2], [1, null]), [], 0, 10).logScaleOk).toBe(true);
  });
});
