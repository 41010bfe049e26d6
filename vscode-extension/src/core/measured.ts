/**
 * What the runner measured of a `train` loop (`step_measured` events,
 * docs/telemetry.md): the parameters of the language server's custom
 * notification `mlpl/stepMeasured` (docs/language-server.md), which puts the
 * measured figures into the loop's lens and hover, and the panel's wording.
 */

import type { StepMeasuredEvent } from "./events";
import { formatBytes, formatDuration } from "./format";
import type { MeasuredRecord, RunRecord } from "./runModel";

/** The language server's notification method. */
export const STEP_MEASURED_METHOD = "mlpl/stepMeasured";

/** The event's fields the language server reads (docs/language-server.md). */
const FORWARDED = [
  "start_line",
  "end_line",
  "device",
  "mode",
  "step",
  "total",
  "measured_steps",
  "step_ms",
  "step_ms_lo",
  "step_ms_hi",
  "peak_rss_bytes",
  "device_peak_bytes",
  "eta_s",
  "done",
] as const;

/** The notification's parameters: those fields of the event and the document's URI. */
export type StepMeasuredParams = Pick<StepMeasuredEvent, (typeof FORWARDED)[number]> & { uri: string };

/**
 * The notification for a `step_measured` event of `run`, or undefined when it
 * cannot be placed in a document: the run was not sent from one (no cell URI)
 * or the runner did not find the loop's statement (`start_line` 0).
 */
export function measuredNotification(e: StepMeasuredEvent, run: RunRecord): StepMeasuredParams | undefined {
  const uri = run.cell?.uri;
  if (!uri || e.start_line < 1) {
    return undefined;
  }
  const fields = Object.fromEntries(FORWARDED.map((key) => [key, e[key]]));
  return { ...fields, uri } as StepMeasuredParams;
}

/** Milliseconds per step with three significant digits: `12.3 ms`, `850 µs`, `2.41 s`. */
export function formatStepMs(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) {
    return "—";
  }
  if (ms >= 1000) {
    return `${(ms / 1000).toPrecision(3)} s`;
  }
  if (ms >= 1) {
    return `${Number(ms.toPrecision(3))} ms`;
  }
  return `${Number((ms * 1000).toPrecision(3))} µs`;
}

/** The peak that counts on the loop's device: the device's own on CUDA and MLX, the process's on the CPU. */
export function measuredPeak(m: MeasuredRecord): { bytes: number; what: string } | null {
  if (m.device !== "cpu" && m.devicePeakBytes !== null) {
    return { bytes: m.devicePeakBytes, what: "device peak" };
  }
  return m.peakRssBytes !== null ? { bytes: m.peakRssBytes, what: "process peak RSS" } : null;
}

/** One line for the panel: `measured 12.3 ms/step (11.9–13.0), peak 410.0 MiB (process peak RSS), ETA 1 min 20 s · estimated 10.1 ms/step (×0.82)`. */
export function measuredText(m: MeasuredRecord): string {
  let s = `measured ${formatStepMs(m.stepMs)}/step (${formatStepMs(m.stepMsLo)}–${formatStepMs(m.stepMsHi)}) on ${m.device}, ${m.mode === "captured" ? "replayed" : "interpreted"}`;
  const peak = measuredPeak(m);
  if (peak) {
    s += `, peak ${formatBytes(peak.bytes)} (${peak.what})`;
  }
  s += m.done ? ", done" : `, ETA ${formatDuration(m.etaS * 1000)}`;
  if (m.estimate && m.stepMs > 0) {
    s += ` · estimated ${formatStepMs(m.estimate.step_ms)}/step (estimate ÷ measured ${(m.estimate.step_ms / m.stepMs).toPrecision(2)})`;
  }
  if (m.correction) {
    s += ` · correction now ×${m.correction.time.toPrecision(3)} time, ×${m.correction.memory.toPrecision(3)} memory (${m.correction.runs} runs)`;
  }
  return s;
}
