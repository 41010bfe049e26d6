import { describe, expect, it } from "vitest";
import type { TelemetryEvent } from "../src/core/events";
import { abandonRun, activeRun, applyEvent, emptySession, findRun, loopProgress, lossDecreased } from "../src/core/runModel";

let seq = 0;
function ev(e: Record<string, unknown>): TelemetryEvent {
  seq++;
  return { v: 1, session: "s1", run: "r1", seq, time: 1000 + seq * 100, ...e } as unknown as TelemetryEvent;
}

describe("applyEvent", () => {
  it("builds a run from its events", () => {
    seq = 0;
    const m = emptySession();
    applyEvent(m, ev({ type: "run_started", cell: { uri: "file:///a.mlpl", index: 2, start_line: 10 }, start_line: 11, end_line: 14, device: "cpu" }));
    expect(activeRun(m)?.id).toBe("r1");
    applyEvent(m, ev({ type: "step", loop: 0, depth: 1, step: 1, total: 10, loss: 2, lr: 0.1, step_ms: 1, items_per_s: 10 }));
    applyEvent(m, ev({ type: "step", loop: 0, depth: 1, step: 10, total: 10, loss: 0.5, lr: 0.1, step_ms: 1, items_per_s: 90 }));
    applyEvent(m, ev({ type: "warning", diagnostic: { code: "W0202", severity: "warning", message: "w", file: null, line: 12, column: 1, end_line: 12, end_column: 2, label: null, notes: [], help: null } }));
    applyEvent(m, ev({ type: "device", device: "cpu", counters: { uploads: 1, downloads: 2, bytes_up: 3, bytes_down: 4, kernel_launches: 5, cpu_fallbacks: 0 }, memory_bytes: 7, peak_memory_bytes: 9 }));
    applyEvent(m, ev({ type: "value", name: "W", kind: "array", shape: [2], named_shape: "[feat=2]", dtype: "f32", preview: "[1, 2]", text: "1 2", truncated: false }));
    applyEvent(m, ev({ type: "output", stream: "stdout", text: "1 2\n" }));
    applyEvent(m, ev({ type: "artifact", kind: "svg", path: null, content: "<svg/>", bytes: 6 }));
    applyEvent(m, ev({ type: "run_finished", status: "ok", elapsed_ms: 42, diagnostic: null, saved: true }));
    const r = findRun(m, "r1")!;
    expect(r).toMatchObject({
      cell: { index: 2 },
      startLine: 11,
      endLine: 14,
      status: "ok",
      elapsedMs: 42,
      counters: { kernel_launches: 5 },
      peakMemoryBytes: 9,
      outputs: ["1 2\n"],
      value: { name: "W", namedShape: "[feat=2]" },
    });
    expect(r.loops[0].steps).toEqual([1, 10]);
    expect(r.loops[0].losses).toEqual([2, 0.5]);
    expect(r.warnings.map((w) => w.code)).toEqual(["W0202"]);
    expect(r.artifacts[0].content).toBe("<svg/>");
    expect(activeRun(m)).toBeUndefined();
    expect(m.lastSeq).toBe(seq);
  });

  it("keeps how the latest train loop ran its steps", () => {
    seq = 0;
    const m = emptySession();
    applyEvent(m, ev({ type: "run_started", cell: null, start_line: 1, end_line: 3, device: "cpu" }));
    const counters = { uploads: 0, downloads: 0, bytes_up: 0, bytes_down: 0, kernel_launches: 1, cpu_fallbacks: 0 };
    applyEvent(m, ev({ type: "device", device: "cpu", counters, memory_bytes: 0, peak_memory_bytes: 0, step_mode: null, step_mode_reason: null }));
    expect(findRun(m, "r1")!.stepMode).toBeNull();
    applyEvent(m, ev({ type: "device", device: "cpu", counters, memory_bytes: 0, peak_memory_bytes: 0, step_mode: "eager", step_mode_reason: "the body reads `step`, so its iterations can differ" }));
    expect(findRun(m, "r1")!.stepMode).toEqual({ mode: "eager", reason: "the body reads `step`, so its iterations can differ" });
    applyEvent(m, ev({ type: "device", device: "cpu", counters, memory_bytes: 0, peak_memory_bytes: 0, step_mode: "captured", step_mode_reason: null }));
    expect(findRun(m, "r1")!.stepMode).toEqual({ mode: "captured", reason: null });
  });

  it("ignores events replayed after a reconnect (seq not newer)", () => {
    seq = 0;
    const m = emptySession();
    const a = ev({ type: "run_started", cell: null, start_line: 1, end_line: 1, device: "cpu" });
    const b = ev({ type: "step", loop: 0, depth: 1, step: 1, total: 2, loss: 1, lr: null, step_ms: 1, items_per_s: null });
    for (const e of [a, b, a, b]) {
      applyEvent(m, e);
    }
    expect(m.runs.length).toBe(1);
    expect(m.runs[0].loops[0].steps).toEqual([1]);
  });

  it("keeps separate loops and at most maxRuns runs", () => {
    seq = 0;
    const m = emptySession(3);
    for (let i = 0; i < 5; i++) {
      applyEvent(m, { ...ev({ type: "run_started", cell: null, start_line: 1, end_line: 1, device: "cpu" }), run: `r${i}` } as TelemetryEvent);
    }
    expect(m.runs.map((r) => r.id)).toEqual(["r2", "r3", "r4"]);
    applyEvent(m, { ...ev({ type: "step", loop: 1, depth: 2, step: 1, total: 5, loss: 1, lr: null, step_ms: 1, items_per_s: null }), run: "r4" } as TelemetryEvent);
    applyEvent(m, { ...ev({ type: "step", loop: 0, depth: 1, step: 1, total: 3, loss: 1, lr: null, step_ms: 1, items_per_s: null }), run: "r4" } as TelemetryEvent);
    expect(findRun(m, "r4")!.loops.map((l) => [l.loop, l.depth, l.total])).toEqual([
      [1, 2, 5],
      [0, 1, 3],
    ]);
  });
});

describe("loopProgress", () => {
  const loop = (steps: number[], times: number[], total: number, itemsPerS: number | null = null) => ({
    loop: 0, depth: 1, total, steps, losses: steps.map(() => 1), lastLr: null, lastStepMs: 1, itemsPerS,
    firstTime: times[0], lastTime: times[times.length - 1], measured: null,
  });
  it("measures steps/s over the events' time span and derives the ETA", () => {
    const p = loopProgress(loop([1, 101], [0, 1000], 501));
    expect(p.step).toBe(101);
    expect(p.stepsPerS).toBeCloseTo(100, 9);
    expect(p.etaS).toBeCloseTo(4, 9);
  });
  it("uses the runner's rate when the span is too short, and reports 0 when done", () => {
    expect(loopProgress(loop([1], [0], 10, 50)).stepsPerS).toBe(50);
    expect(loopProgress(loop([1, 10], [0, 5], 10, 50)).etaS).toBe(0);
    expect(loopProgress(loop([1], [0], 10)).etaS).toBeNull();
  });
});

describe("lossDecreased", () => {
  const withLosses = (losses: (number | null)[]) => ({
    loop: 0, depth: 1, total: losses.length, steps: losses.map((_, i) => i + 1), losses, lastLr: null, lastStepMs: 0, itemsPerS: null, firstTime: 0, lastTime: 0, measured: null,
  });
  it("compares the first and last quarters", () => {
    expect(lossDecreased(withLosses([4, 3, 2, 1]))).toBe(true);
    expect(lossDecreased(withLosses([1, 2, 3, 4]))).toBe(false);
    expect(lossDecreased(withLosses([1]))).toBe(false);
    expect(lossDecreased(withLosses([null, 5, null, 1]))).toBe(true);
  });
});

describe("abandonRun", () => {
  it("fails a running run and creates an unknown one, leaving finished runs alone", () => {
    seq = 0;
    const m = emptySession();
    applyEvent(m, ev({ type: "run_started", cell: null, start_line: 1, end_line: 1, device: "cpu" }));
    expect(abandonRun(m, "r1", 0).status).toBe("error");
    expect(abandonRun(m, "never-seen", 5)).toMatchObject({ id: "never-seen", status: "error" });
    expect(m.runs.map((r) => r.id)).toEqual(["r1", "never-seen"]);
    applyEvent(m, { ...ev({ type: "run_finished", status: "ok", elapsed_ms: 1, diagnostic: null, saved: null }), run: "r9" } as TelemetryEvent);
    expect(abandonRun(m, "r9", 0).status).toBe("ok");
  });
});
