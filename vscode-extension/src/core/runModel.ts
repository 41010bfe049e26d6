/**
 * What the telemetry events of one session add up to: each run with its loss
 * curves (one per `train` loop), throughput and ETA, device counters, warnings,
 * printed text, artifacts, value and outcome. Plain data (JSON-serialisable), so
 * the extension host and the webview panel keep the same model from the same
 * events.
 */

import type { CellRef, Correction, Counters, MeasuredEstimate, RunDiagnostic, TelemetryEvent } from "./events";

/** What the runner measured of a top-level loop's steps (its latest `step_measured` event). */
export interface MeasuredRecord {
  /** Lines (1-based) of the `train` statement in the run's document; 0 when unknown. */
  startLine: number;
  endLine: number;
  device: string;
  mode: string;
  step: number;
  total: number;
  measuredSteps: number;
  stepMs: number;
  stepMsLo: number;
  stepMsHi: number;
  peakRssBytes: number | null;
  devicePeakBytes: number | null;
  stepPeakBytes: number | null;
  etaS: number;
  done: boolean;
  estimate: MeasuredEstimate | null;
  correction: Correction | null;
}

/** One `train` loop of a run. */
export interface LoopRecord {
  loop: number;
  depth: number;
  total: number;
  /** Completed iteration counts (1-based) of the step events received. */
  steps: number[];
  /** Loss at each of `steps` (null when not finite). */
  losses: (number | null)[];
  lastLr: number | null;
  lastStepMs: number;
  /** Iterations per second reported by the latest step event. */
  itemsPerS: number | null;
  /** Event times (ms since the epoch) of the first and latest step. */
  firstTime: number;
  lastTime: number;
  /** The runner's measurement of its steps, once it sent one. */
  measured: MeasuredRecord | null;
}

/** A run's status. */
export type RunStatus = "running" | "ok" | "error" | "cancelled";

/** The run's value, as the `value` event reports it. */
export interface ValueSummary {
  name: string | null;
  kind: string;
  namedShape: string | null;
  preview: string;
  text: string;
}

/** Everything known about one run. */
export interface RunRecord {
  id: string;
  cell: CellRef | null;
  /** Document lines (1-based, inclusive) the run's code covers. */
  startLine: number;
  endLine: number;
  device: string;
  status: RunStatus;
  startTime: number;
  elapsedMs: number | null;
  loops: LoopRecord[];
  counters: Counters | null;
  memoryBytes: number;
  peakMemoryBytes: number;
  /** How the latest `train` loop ran its steps ("captured" or "eager"), and why not captured. */
  stepMode: { mode: string; reason: string | null } | null;
  /** The captured step's arena bytes and the eager step's live peak (latest loop), when known. */
  stepArenaBytes: number | null;
  stepEagerPeakBytes: number | null;
  warnings: RunDiagnostic[];
  outputs: string[];
  artifacts: { kind: string; path: string | null; content: string | null; bytes: number }[];
  value: ValueSummary | null;
  diagnostic: RunDiagnostic | null;
}

/** The runs of a session, oldest first, and the newest sequence number seen. */
export interface SessionModel {
  session: string | null;
  runs: RunRecord[];
  lastSeq: number;
  /** Runs kept at most (older ones are dropped). */
  maxRuns: number;
}

/** An empty model keeping at most `maxRuns` runs. */
export function emptySession(maxRuns = 50): SessionModel {
  return { session: null, runs: [], lastSeq: 0, maxRuns };
}

/** The run with this id, if kept. */
export function findRun(m: SessionModel, id: string): RunRecord | undefined {
  for (let i = m.runs.length - 1; i >= 0; i--) {
    if (m.runs[i].id === id) {
      return m.runs[i];
    }
  }
  return undefined;
}

/** The newest run that is still running, if any. */
export function activeRun(m: SessionModel): RunRecord | undefined {
  const last = m.runs[m.runs.length - 1];
  return last && last.status === "running" ? last : undefined;
}

function newRun(id: string, time: number): RunRecord {
  return {
    id,
    cell: null,
    startLine: 1,
    endLine: 1,
    device: "cpu",
    status: "running",
    startTime: time,
    elapsedMs: null,
    loops: [],
    counters: null,
    memoryBytes: 0,
    peakMemoryBytes: 0,
    stepMode: null,
    stepArenaBytes: null,
    stepEagerPeakBytes: null,
    warnings: [],
    outputs: [],
    artifacts: [],
    value: null,
    diagnostic: null,
  };
}

/**
 * Applies one event. Events at or below `lastSeq` (a replay after a reconnect) are
 * ignored, so applying a stream twice changes nothing. Returns the run the event
 * belongs to, or undefined if it was ignored.
 */
export function applyEvent(m: SessionModel, e: TelemetryEvent): RunRecord | undefined {
  if (e.seq <= m.lastSeq && m.session === e.session) {
    return undefined;
  }
  if (m.session !== e.session) {
    m.session = e.session;
  }
  m.lastSeq = e.seq;
  let run = findRun(m, e.run);
  if (!run) {
    run = newRun(e.run, e.time);
    m.runs.push(run);
    if (m.runs.length > m.maxRuns) {
      m.runs.splice(0, m.runs.length - m.maxRuns);
    }
  }
  switch (e.type) {
    case "run_started":
      run.cell = e.cell;
      run.startLine = e.start_line;
      run.endLine = e.end_line;
      run.device = e.device;
      run.startTime = e.time;
      break;
    case "output":
      run.outputs.push(e.text);
      break;
    case "step": {
      const loop = loopOf(run, e.loop, e.depth, e.total, e.time);
      loop.total = e.total;
      loop.steps.push(e.step);
      loop.losses.push(e.loss);
      loop.lastLr = e.lr;
      loop.lastStepMs = e.step_ms;
      loop.itemsPerS = e.items_per_s;
      loop.lastTime = e.time;
      break;
    }
    case "device":
      run.counters = e.counters;
      run.memoryBytes = e.memory_bytes;
      run.peakMemoryBytes = Math.max(run.peakMemoryBytes, e.peak_memory_bytes);
      if (e.step_mode) run.stepMode = { mode: e.step_mode, reason: e.step_mode_reason ?? null };
      if (e.step_arena_bytes !== null) run.stepArenaBytes = e.step_arena_bytes;
      if (e.step_eager_peak_bytes !== null) run.stepEagerPeakBytes = e.step_eager_peak_bytes;
      break;
    case "step_measured":
      loopOf(run, e.loop, 1, e.total, e.time).measured = {
        startLine: e.start_line,
        endLine: e.end_line,
        device: e.device,
        mode: e.mode,
        step: e.step,
        total: e.total,
        measuredSteps: e.measured_steps,
        stepMs: e.step_ms,
        stepMsLo: e.step_ms_lo,
        stepMsHi: e.step_ms_hi,
        peakRssBytes: e.peak_rss_bytes,
        devicePeakBytes: e.device_peak_bytes,
        stepPeakBytes: e.step_peak_bytes,
        etaS: e.eta_s,
        done: e.done,
        estimate: e.estimate,
        correction: e.correction,
      };
      break;
    case "value":
      run.value = { name: e.name, kind: e.kind, namedShape: e.named_shape, preview: e.preview, text: e.text };
      break;
    case "artifact":
      run.artifacts.push({ kind: e.kind, path: e.path, content: e.content, bytes: e.bytes });
      break;
    case "warning":
      run.warnings.push(e.diagnostic);
      break;
    case "run_finished":
      run.status = e.status;
      run.elapsedMs = e.elapsed_ms;
      run.diagnostic = e.diagnostic;
      if (e.counters) run.counters = e.counters;
      break;
    case "unknown":
      break;
  }
  return run;
}

/** The record of loop `index` of a run, made when missing. */
function loopOf(run: RunRecord, index: number, depth: number, total: number, time: number): LoopRecord {
  let loop = run.loops.find((l) => l.loop === index);
  if (!loop) {
    loop = {
      loop: index,
      depth,
      total,
      steps: [],
      losses: [],
      lastLr: null,
      lastStepMs: 0,
      itemsPerS: null,
      firstTime: time,
      lastTime: time,
      measured: null,
    };
    run.loops.push(loop);
  }
  return loop;
}

/**
 * Marks a run whose runner went away before its `run_finished` as failed (creating
 * its record if no event of it arrived) and returns it, so nothing waits forever.
 */
export function abandonRun(m: SessionModel, id: string, time: number): RunRecord {
  let run = findRun(m, id);
  if (!run) {
    run = newRun(id, time);
    m.runs.push(run);
  }
  if (run.status === "running") {
    run.status = "error";
  }
  return run;
}

/** Throughput and remaining time of a loop. */
export interface Progress {
  step: number;
  total: number;
  /** Iterations per second: the average since the first step event when it spans
   * time, else the runner's latest `items_per_s`. */
  stepsPerS: number | null;
  /** Seconds to the loop's end at that rate (0 when done, null when unknown). */
  etaS: number | null;
}

/** Progress of one loop. */
export function loopProgress(l: LoopRecord): Progress {
  const step = l.steps.length ? l.steps[l.steps.length - 1] : 0;
  const first = l.steps.length ? l.steps[0] : 0;
  const spanS = (l.lastTime - l.firstTime) / 1000;
  let rate: number | null = null;
  if (spanS > 0.2 && step > first) {
    rate = (step - first) / spanS;
  } else if (l.itemsPerS !== null && l.itemsPerS > 0) {
    rate = l.itemsPerS;
  }
  const left = Math.max(0, l.total - step);
  const eta = left === 0 ? 0 : rate ? left / rate : null;
  return { step, total: l.total, stepsPerS: rate, etaS: eta };
}

/** Whether a loop's loss went down: the mean of its last quarter of finite losses
 * is below the mean of its first quarter (needs at least two finite losses). */
export function lossDecreased(l: LoopRecord): boolean {
  const xs = l.losses.filter((x): x is number => x !== null);
  if (xs.length < 2) {
    return false;
  }
  const q = Math.max(1, Math.floor(xs.length / 4));
  const mean = (a: number[]) => a.reduce((s, x) => s + x, 0) / a.length;
  return mean(xs.slice(xs.length - q)) < mean(xs.slice(0, q));
}
