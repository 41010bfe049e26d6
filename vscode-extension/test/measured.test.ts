import { describe, expect, it } from "vitest";
import { parseEventData, type StepMeasuredEvent } from "../src/core/events";
import { formatStepMs, measuredNotification, measuredText } from "../src/core/measured";
import { applyEvent, emptySession } from "../src/core/runModel";

const started = '{"v":1,"session":"s","run":"r1","seq":1,"time":1,"type":"run_started","cell":{"uri":"file:///w/nb.mlpl","index":1,"start_line":6},"start_line":7,"end_line":12,"device":"cpu"}';
const step = '{"v":1,"session":"s","run":"r1","seq":2,"time":2,"type":"step","loop":0,"depth":1,"step":1,"total":100,"loss":2.3,"lr":null,"step_ms":40,"items_per_s":null}';
// A `step_measured` event as the runner sends it (docs/telemetry.md).
const measured = (seq: number, extra: Record<string, unknown> = {}) => JSON.stringify({
  v: 1, session: "s", run: "r1", seq, time: 3, type: "step_measured", loop: 0, start_line: 9, end_line: 11,
  device: "cpu", mode: "captured", step: 20, total: 100, measured_steps: 17, step_ms: 12.3, step_ms_lo: 11.9,
  step_ms_hi: 13.0, peak_rss_bytes: 410000000, device_peak_bytes: null, step_peak_bytes: 1200000, eta_s: 98.4,
  done: false, estimate: { step_ms: 10.1, step_ms_lo: 9.0, step_ms_hi: 11.5, memory_bytes: 380000000 }, correction: null,
  ...extra,
});

describe("step_measured events", () => {
  it("are parsed with every field, defaults for the optional ones", () => {
    const e = parseEventData(measured(3));
    expect(e).toMatchObject({
      type: "step_measured", loop: 0, start_line: 9, device: "cpu", mode: "captured", step: 20, total: 100,
      step_ms: 12.3, step_ms_lo: 11.9, peak_rss_bytes: 410000000, device_peak_bytes: null, eta_s: 98.4, done: false,
      estimate: { step_ms: 10.1, memory_bytes: 380000000 }, correction: null,
    });
    // Without percentiles or an ETA: the median, and the ETA at it.
    const bare = parseEventData('{"v":1,"session":"s","run":"r1","seq":3,"time":3,"type":"step_measured","step":10,"total":30,"step_ms":5}') as StepMeasuredEvent;
    expect(bare).toMatchObject({ step_ms_lo: 5, step_ms_hi: 5, eta_s: 0.1, estimate: null, start_line: 0 });
    // A step time is required.
    expect(parseEventData('{"v":1,"session":"s","run":"r1","seq":3,"time":3,"type":"step_measured","step":10,"total":30}')).toBeUndefined();
  });

  it("become the language server's notification with the run's document", () => {
    const m = emptySession();
    applyEvent(m, parseEventData(started)!);
    applyEvent(m, parseEventData(step)!);
    const e = parseEventData(measured(3)) as StepMeasuredEvent;
    const run = applyEvent(m, e)!;
    expect(measuredNotification(e, run)).toEqual({
      uri: "file:///w/nb.mlpl", start_line: 9, end_line: 11, device: "cpu", mode: "captured", step: 20, total: 100,
      measured_steps: 17, step_ms: 12.3, step_ms_lo: 11.9, step_ms_hi: 13.0, peak_rss_bytes: 410000000,
      device_peak_bytes: null, eta_s: 98.4, done: false,
    });
    // No document (a run sent without a cell) or no statement found: nothing to send.
    expect(measuredNotification(e, { ...run, cell: null })).toBeUndefined();
    expect(measuredNotification({ ...e, start_line: 0 }, run)).toBeUndefined();
  });

  it("are kept on their loop, the latest one winning, and worded for the panel", () => {
    const m = emptySession();
    applyEvent(m, parseEventData(started)!);
    applyEvent(m, parseEventData(step)!);
    applyEvent(m, parseEventData(measured(3))!);
    const run = applyEvent(m, parseEventData(measured(4, { step: 100, eta_s: 0, done: true, correction: { time: 1.2, memory: 0.9, runs: 3 } }))!)!;
    expect(run.loops).toHaveLength(1);
    const rec = run.loops[0].measured!;
    expect(rec).toMatchObject({ step: 100, done: true, stepMs: 12.3, correction: { time: 1.2, runs: 3 } });
    const text = measuredText(rec);
    expect(text).toContain("measured 12.3 ms/step (11.9 ms–13 ms) on cpu, replayed");
    expect(text).toContain("peak 391.0 MiB (process peak RSS), done");
    expect(text).toContain("estimated 10.1 ms/step (estimate ÷ measured 0.82)");
    expect(text).toContain("correction now ×1.20 time, ×0.900 memory (3 runs)");
    // On a GPU the device's own peak counts.
    const gpu = measuredText({ ...rec, device: "cuda", devicePeakBytes: 2 * 1024 ** 3, done: false, etaS: 80 });
    expect(gpu).toContain("peak 2.0 GiB (device peak), ETA 1 min 20 s");
  });

  it("formats step times with three significant digits", () => {
    expect(formatStepMs(12.345)).toBe("12.3 ms");
    expect(formatStepMs(0.85)).toBe("850 µs");
    expect(formatStepMs(2412)).toBe("2.41 s");
    expect(formatStepMs(Number.NaN)).toBe("—");
  });
});

describe("device and run_finished fields", () => {
  it("reads the step memory of device events and the counters and memory of run_finished", () => {
    const d = parseEventData('{"v":1,"session":"s","run":"r1","seq":5,"time":5,"type":"device","device":"cpu","counters":{"uploads":0,"downloads":0,"bytes_up":0,"bytes_down":0,"kernel_launches":9,"cpu_fallbacks":0},"memory_bytes":0,"peak_memory_bytes":0,"step_mode":"captured","step_mode_reason":null,"step_arena_bytes":4096,"step_eager_peak_bytes":8192}');
    expect(d).toMatchObject({ step_arena_bytes: 4096, step_eager_peak_bytes: 8192 });
    const f = parseEventData('{"v":1,"session":"s","run":"r1","seq":6,"time":6,"type":"run_finished","status":"ok","elapsed_ms":3,"diagnostic":null,"saved":null,"counters":{"uploads":1,"downloads":2,"bytes_up":3,"bytes_down":4,"kernel_launches":9,"cpu_fallbacks":0},"memory":{"live_bytes":36,"budget_bytes":null}}');
    expect(f).toMatchObject({ counters: { kernel_launches: 9, downloads: 2 }, memory: { live_bytes: 36, budget_bytes: null } });
    const m = emptySession();
    applyEvent(m, parseEventData(started)!);
    const run = applyEvent(m, d!)!;
    expect(run).toMatchObject({ stepArenaBytes: 4096, stepEagerPeakBytes: 8192 });
    applyEvent(m, f!);
    expect(run.counters?.downloads).toBe(2);
    // Older runners omit them.
    const old = parseEventData('{"v":1,"session":"s","run":"r1","seq":7,"time":7,"type":"run_finished","status":"ok","elapsed_ms":3,"diagnostic":null,"saved":null}');
    expect(old).toMatchObject({ counters: null, memory: null });
  });
});
