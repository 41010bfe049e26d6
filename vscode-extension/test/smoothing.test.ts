import { describe, expect, it } from "vitest";
import { emaDebiased } from "../src/core/smoothing";
import { lossChart, lttbIndices } from "../src/core/downsample";

describe("emaDebiased", () => {
  it("starts at the first value (bias-corrected) and follows the EMA recurrence", () => {
    const w = 0.9;
    const xs = [10, 0, 0, 4];
    const out = emaDebiased(xs, w);
    // Reference: s_t = w s_{t-1} + (1-w) x_t, divided by 1 - w^t.
    let s = 0;
    xs.forEach((x, i) => {
      s = w * s + (1 - w) * x;
      expect(out[i]).toBeCloseTo(s / (1 - Math.pow(w, i + 1)), 12);
    });
    expect(out[0]).toBeCloseTo(10, 12);
  });

  it("is the identity with weight 0 and keeps a constant series constant", () => {
    expect(emaDebiased([3, 1, 2], 0)).toEqual([3, 1, 2]);
    for (const v of emaDebiased([5, 5, 5, 5, 5], 0.99)) {
      expect(v).toBeCloseTo(5, 10);
    }
  });

  it("skips nulls and non-finite values without advancing", () => {
    const out = emaDebiased([2, null, Number.NaN, 2], 0.5);
    expect(out[1]).toBeNull();
    expect(out[2]).toBeNull();
    expect(out[3]).toBeCloseTo(2, 12);
  });

  it("rejects a weight outside [0, 1)", () => {
    expect(() => emaDebiased([1], 1)).toThrow(/\[0, 1\)/);
    expect(() => emaDebiased([1], -0.1)).toThrow();
  });
});

describe("lttbIndices", () => {
  it("keeps every point when under the threshold", () => {
    expect(lttbIndices([0, 1, 2], [1, 2, 3], 10)).toEqual([0, 1, 2]);
  });

  it("returns at most `threshold` ascending indices including both ends", () => {
    const n = 10_000;
    const xs = Array.from({ length: n }, (_, i) => i);
    const ys = xs.map((x) => Math.sin(x / 100) + Math.random() * 0.01);
    const idx = lttbIndices(xs, ys, 500);
    expect(idx.length).toBe(500);
    expect(idx[0]).toBe(0);
    expect(idx[idx.length - 1]).toBe(n - 1);
    for (let i = 1; i < idx.length; i++) {
      expect(idx[i]).toBeGreaterThan(idx[i - 1]);
    }
  });

  it("keeps a single spike that striding would drop", () => {
    const n = 1000;
    const xs = Array.from({ length: n }, (_, i) => i);
    const ys = xs.map((x) => (x === 503 ? 100 : 1));
    expect(lttbIndices(xs, ys, 50)).toContain(503);
  });

  it("never picks null points", () => {
    const xs = Array.from({ length: 100 }, (_, i) => i);
    const ys = xs.map((x) => (x % 3 === 0 ? null : x));
    for (const i of lttbIndices(xs, ys, 20)) {
      expect(ys[i]).not.toBeNull();
    }
  });
});

describe("lossChart", () => {
  it("smooths on the full series before downsampling", () => {
    const n = 5000;
    const steps = Array.from({ length: n }, (_, i) => i + 1);
    const losses = steps.map((s) => 1 / s + (s % 2 ? 0.05 : -0.05));
    const chart = lossChart(steps, losses, 0.95, 200);
    const full = emaDebiased(losses, 0.95);
    expect(chart.x.length).toBe(200);
    chart.x.forEach((x, i) => {
      expect(chart.smooth[i]).toBe(full[x - 1]);
      expect(chart.raw[i]).toBe(losses[x - 1]);
    });
  });
});
