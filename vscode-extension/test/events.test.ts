import { describe, expect, it } from "vitest";
import { diagnosticRange, parseEvent, parseEventData } from "../src/core/events";

// Events exactly as docs/telemetry.md shows them (`mlpl run --events jsonl`).
const DOC_EVENTS = [
  '{"v":1,"session":"cli","run":"run-1","seq":1,"time":1796013388112,"type":"run_started","cell":{"uri":"ex.mlpl","index":0,"start_line":0},"start_line":1,"end_line":4,"device":"cpu"}',
  '{"v":1,"session":"cli","run":"run-1","seq":2,"time":1796013388112,"type":"step","loop":0,"depth":1,"step":1,"total":3,"loss":4.41999626159668,"lr":null,"step_ms":0.080929,"items_per_s":12271.293762501382}',
  '{"v":1,"session":"cli","run":"run-1","seq":4,"time":1796013388112,"type":"warning","diagnostic":{"code":"W0202","column":8,"end_column":11,"end_line":3,"file":"ex.mlpl","help":null,"label":"runs 1 times","labels":[],"line":3,"message":"fraction truncated","notes":[],"severity":"warning"}}',
  '{"v":1,"session":"cli","run":"run-1","seq":5,"time":1796013388112,"type":"device","device":"cpu","counters":{"uploads":0,"downloads":0,"bytes_up":0,"bytes_down":0,"kernel_launches":39,"cpu_fallbacks":0},"memory_bytes":0,"peak_memory_bytes":0}',
  '{"v":1,"session":"cli","run":"run-1","seq":6,"time":1796013388112,"type":"value","name":"V","kind":"array","shape":[2],"axes":["feat"],"named_shape":"[feat=2]","dtype":"f32","preview":"[0.29841572, 0.29937863]","text":"0.29841572 0.29937863","truncated":false}',
  '{"v":1,"session":"cli","run":"run-1","seq":8,"time":1796013388112,"type":"run_finished","status":"ok","elapsed_ms":0.291923,"diagnostic":null,"saved":null}',
];

describe("parseEvent", () => {
  it("reads the step mode of device events", () => {
    const e = parseEventData(
      '{"v":1,"session":"cli","run":"run-1","seq":3,"time":1,"type":"device","device":"cpu","counters":{"uploads":0,"downloads":0,"bytes_up":0,"bytes_down":0,"kernel_launches":266,"cpu_fallbacks":0},"memory_bytes":0,"peak_memory_bytes":0,"step_mode":"captured","step_mode_reason":null}',
    );
    expect(e).toMatchObject({ type: "device", step_mode: "captured", step_mode_reason: null });
    const old = parseEventData(DOC_EVENTS[3]);
    expect(old).toMatchObject({ type: "device", step_mode: null, step_mode_reason: null });
  });

  it("reads MLX's evaluations counter, absent on the other devices", () => {
    const mlx = parseEventData(
      '{"v":1,"session":"cli","run":"run-1","seq":3,"time":1,"type":"device","device":"mlx","counters":{"uploads":2,"downloads":1,"bytes_up":8,"bytes_down":4,"kernel_launches":12,"cpu_fallbacks":0,"evaluations":3},"memory_bytes":64,"peak_memory_bytes":64}',
    );
    expect(mlx).toMatchObject({ type: "device", device: "mlx", counters: { evaluations: 3, kernel_launches: 12 } });
    const cpu = parseEventData(DOC_EVENTS[3]);
    expect(cpu?.type === "device" && "evaluations" in cpu.counters).toBe(false);
  });

  it("reads every documented event type with its fields", () => {
    const evs = DOC_EVENTS.map(parseEventData);
    expect(evs.map((e) => e?.type)).toEqual(["run_started", "step", "warning", "device", "value", "run_finished"]);
    const [started, step, warning, device, value, finished] = evs;
    expect(started).toMatchObject({ cell: { uri: "ex.mlpl", index: 0, start_line: 0 }, start_line: 1, end_line: 4, device: "cpu" });
    expect(step).toMatchObject({ loop: 0, step: 1, total: 3, loss: 4.41999626159668, lr: null });
    expect(warning).toMatchObject({ diagnostic: { code: "W0202", severity: "warning", line: 3, column: 8 } });
    expect(device).toMatchObject({ counters: { kernel_launches: 39 } });
    expect(value).toMatchObject({ name: "V", named_shape: "[feat=2]", shape: [2] });
    expect(finished).toMatchObject({ status: "ok", diagnostic: null, saved: null });
  });

  it("keeps unknown event types as `unknown` (newer runners add types)", () => {
    expect(parseEvent({ v: 1, session: "s", run: "r", seq: 3, time: 0, type: "gpu_sample", watts: 3 })).toMatchObject({ type: "unknown", name: "gpu_sample" });
  });

  it("rejects events without the common fields or with invalid required fields", () => {
    expect(parseEvent(null)).toBeUndefined();
    expect(parseEvent([1])).toBeUndefined();
    expect(parseEvent({ v: 1, session: "s", run: "r", type: "output" })).toBeUndefined(); // no seq
    expect(parseEvent({ v: 1, session: "s", run: "r", seq: 1, type: "step", loss: 1 })).toBeUndefined(); // no step/total
    expect(parseEvent({ v: 1, session: "s", run: "r", seq: 1, type: "run_finished", status: "weird" })).toBeUndefined();
    expect(parseEvent({ v: 1, session: "s", run: "r", seq: 1, type: "warning", diagnostic: { code: 3 } })).toBeUndefined();
    expect(parseEventData("{not json")).toBeUndefined();
  });

  it("reads a null loss (not finite) as null", () => {
    const e = parseEvent({ v: 1, session: "s", run: "r", seq: 1, time: 0, type: "step", step: 2, total: 4, loss: null });
    expect(e).toMatchObject({ type: "step", loss: null, items_per_s: null });
  });
});

describe("diagnosticRange", () => {
  const base = { code: "E0101", severity: "error" as const, message: "m", file: null, label: null, notes: [], help: null };
  it("converts 1-based, end-exclusive positions to 0-based", () => {
    expect(diagnosticRange({ ...base, line: 2, column: 9, end_line: 2, end_column: 13 }, 0)).toEqual({ startLine: 1, startCol: 8, endLine: 1, endCol: 12 });
  });
  it("widens an empty range to one character", () => {
    expect(diagnosticRange({ ...base, line: 3, column: 5, end_line: 3, end_column: 5 }, 0)).toEqual({ startLine: 2, startCol: 4, endLine: 2, endCol: 5 });
  });
  it("falls back to the run's first line without a position", () => {
    const r = diagnosticRange({ ...base, line: null, column: null, end_line: null, end_column: null }, 7);
    expect(r.startLine).toBe(7);
    expect(r.endLine).toBe(7);
  });
});
