import { describe, expect, it } from "vitest";
import { barGeometry, formatMicros, MAX_KERNEL_BARS, parseTimeline, revealRequest, revealSelection } from "../src/core/timeline";

/** The shape `mlpl serve` sends (docs/traces.md), trimmed to a few events. */
const FILE = JSON.stringify({
  traceEvents: [
    { name: "process_name", ph: "M", pid: 1, tid: 0, ts: 0, args: { name: "session s run r1" } },
    { name: "kernels", cat: "device", ph: "C", ts: 0, pid: 1, tid: 0, args: { kernel_launches: 0, cpu_fallbacks: 0 } },
    { name: "W = param[2]", cat: "statement", ph: "X", ts: 10, dur: 40, pid: 1, tid: 1, args: { line: 8, end_line: 8, ok: true, kernel_launches: 1 } },
    { name: "train 2 { …", cat: "statement", ph: "X", ts: 60, dur: 900, pid: 1, tid: 1, args: { line: 9, end_line: 12, ok: true, kernel_launches: 40 } },
    { name: "train 2", cat: "train", ph: "X", ts: 65, dur: 880, pid: 1, tid: 2, args: { completed: 2, total: 2, step_mode: "eager" } },
    { name: "step 1", cat: "train_step", ph: "X", ts: 65, dur: 400, pid: 1, tid: 2, args: { step: 1, loss: 0.5 } },
    { name: "step 2", cat: "train_step", ph: "X", ts: 470, dur: 470, pid: 1, tid: 2, args: { step: 2, loss: null } },
    { name: "kernels", cat: "device", ph: "C", ts: 960, pid: 1, tid: 0, args: { kernel_launches: 41, cpu_fallbacks: 0 } },
    { name: "bad = x", cat: "statement", ph: "X", ts: 970, dur: 30, pid: 1, tid: 1, args: { line: 13, end_line: 13, ok: false, kernel_launches: 0 } },
  ],
  displayTimeUnit: "ms",
});

describe("parseTimeline", () => {
  it("turns statements, loops and iterations into rows of bars linked to lines", () => {
    const v = parseTimeline(FILE)!;
    expect(v.total).toBe(1000);
    expect(v.counterSamples).toBe(2);
    expect(v.bars.map((b) => [b.kind, b.row])).toEqual([
      ["statement", 0],
      ["statement", 0],
      ["train", 1],
      ["train_step", 2],
      ["train_step", 2],
      ["statement", 0],
    ]);
    const train = v.bars[1];
    expect([train.line, train.endLine, train.ok, train.detail]).toEqual([9, 12, true, "40 kernels"]);
    expect(v.bars[2].detail).toBe("2/2 steps, eager");
    expect(v.bars[3].detail).toBe("loss 0.50000");
    expect(v.bars[4].detail).toBe("loss —");
    expect(v.bars[4].line).toBeNull();
    expect(v.bars[5].ok).toBe(false);
  });

  it("rejects what is not a trace event file", () => {
    expect(parseTimeline("not json")).toBeNull();
    expect(parseTimeline(JSON.stringify({ events: [] }))).toBeNull();
    expect(parseTimeline(JSON.stringify({ traceEvents: [] }))).toEqual({ total: 0, bars: [], counterSamples: 0, kernels: 0 });
  });

  it("puts kernels on their own row with their input shapes, at most MAX_KERNEL_BARS of them", () => {
    const kernel = (ts: number) => ({ name: "matmul", cat: "kernel", ph: "X", ts, dur: 1, pid: 1, tid: 3, args: { inputs: [[4, 4], [4, 2], []] } });
    const v = parseTimeline(JSON.stringify({ traceEvents: [kernel(5)] }))!;
    expect(v.bars.map((b) => [b.kind, b.row, b.detail, b.line])).toEqual([["kernel", 3, "4×4, 4×2, scalar", null]]);
    const many = parseTimeline(JSON.stringify({ traceEvents: Array.from({ length: MAX_KERNEL_BARS + 7 }, (_, i) => kernel(i)) }))!;
    expect(many.kernels).toBe(MAX_KERNEL_BARS + 7);
    expect(many.bars.length).toBe(MAX_KERNEL_BARS);
  });
});

describe("barGeometry", () => {
  it("scales times to the strip and keeps every bar visible", () => {
    const v = parseTimeline(FILE)!;
    expect(barGeometry(v, v.bars[1], 1000)).toEqual({ x: 60, w: 900 });
    expect(barGeometry(v, { ...v.bars[0], dur: 0 }, 1000).w).toBe(1);
    const last = barGeometry(v, v.bars[5], 100);
    expect(last.x + last.w).toBeLessThanOrEqual(100);
  });
});

describe("formatMicros", () => {
  it("picks a unit", () => {
    expect(formatMicros(850)).toBe("850 µs");
    expect(formatMicros(12_300)).toBe("12.3 ms");
    expect(formatMicros(2_100_000)).toBe("2.10 s");
  });
});

describe("revealRequest", () => {
  it("links a statement bar to its document lines, and nothing else", () => {
    const v = parseTimeline(FILE)!;
    const uri = "file:///w/train.mlpl";
    expect(revealRequest(v.bars[1], uri)).toEqual({ type: "reveal", uri, line: 9, endLine: 12 });
    expect(revealRequest(v.bars[0], uri)).toEqual({ type: "reveal", uri, line: 8, endLine: 8 });
    // A loop, an iteration, a run without a document: no link.
    expect(revealRequest(v.bars[2], uri)).toBeNull();
    expect(revealRequest(v.bars[3], uri)).toBeNull();
    expect(revealRequest(v.bars[1], undefined)).toBeNull();
    // A statement without an end line shows its first line.
    expect(revealRequest({ ...v.bars[1], endLine: null }, uri)).toEqual({ type: "reveal", uri, line: 9, endLine: 9 });
  });
});

describe("revealSelection", () => {
  const len = (l: number) => 10 + l;
  it("selects from the first line's start to the last line's end, 0-based", () => {
    expect(revealSelection(9, 12, 20, len)).toEqual({ startLine: 8, endLine: 11, endCharacter: 21 });
    expect(revealSelection(1, 1, 20, len)).toEqual({ startLine: 0, endLine: 0, endCharacter: 10 });
  });
  it("clamps lines the document no longer has", () => {
    expect(revealSelection(9, 12, 10, len)).toEqual({ startLine: 8, endLine: 9, endCharacter: 19 });
    expect(revealSelection(30, 40, 10, len)).toEqual({ startLine: 9, endLine: 9, endCharacter: 19 });
    expect(revealSelection(5, 2, 10, len)).toEqual({ startLine: 4, endLine: 4, endCharacter: 14 });
  });
});
