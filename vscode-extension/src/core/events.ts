/**
 * Telemetry events of the runner (docs/telemetry.md, schema 1) as typed values.
 * `parseEvent` validates the fields the extension relies on and returns
 * undefined for malformed input; unknown event types are kept as `unknown` so
 * that a newer runner never breaks an older client.
 */

/** Schema version this client understands. */
export const SCHEMA_VERSION = 1;

/** A diagnostic in the JSON form of `mlpl check --format json` (1-based lines and columns). */
export interface RunDiagnostic {
  code: string;
  severity: "error" | "warning";
  message: string;
  file: string | null;
  line: number | null;
  column: number | null;
  end_line: number | null;
  end_column: number | null;
  label: string | null;
  notes: string[];
  help: string | null;
}

/** Where the code of a run sits in its document. */
export interface CellRef {
  uri: string;
  index: number;
  start_line: number;
}

/** Device counters reported by `device` events. */
export interface Counters {
  uploads: number;
  downloads: number;
  bytes_up: number;
  bytes_down: number;
  kernel_launches: number;
  cpu_fallbacks: number;
  /** Evaluations of a lazy device's graph (MLX); absent when 0. */
  evaluations?: number;
}

interface Common {
  v: number;
  session: string;
  run: string;
  seq: number;
  time: number;
}

/** A run began. */
export interface RunStartedEvent extends Common {
  type: "run_started";
  cell: CellRef | null;
  start_line: number;
  end_line: number;
  device: string;
}
/** Text the run printed. */
export interface OutputEvent extends Common {
  type: "output";
  stream: string;
  text: string;
}
/** Progress of a `train` loop. */
export interface StepEvent extends Common {
  type: "step";
  loop: number;
  depth: number;
  step: number;
  total: number;
  loss: number | null;
  lr: number | null;
  step_ms: number;
  items_per_s: number | null;
}
/** Device counters and memory. */
export interface DeviceEvent extends Common {
  type: "device";
  device: string;
  counters: Counters;
  memory_bytes: number;
  peak_memory_bytes: number;
  /** How the latest `train` loop runs its steps: "captured" or "eager"; null before any loop. */
  step_mode: string | null;
  /** Why that loop is not captured. */
  step_mode_reason: string | null;
  /** Bytes the captured step's arena holds while it replays; null when not captured to an arena. */
  step_arena_bytes: number | null;
  /** The eager step's live peak in bytes; null when the loop was not recorded. */
  step_eager_peak_bytes: number | null;
}
/** The estimate of a measured loop, as the editor shows it. */
export interface MeasuredEstimate {
  step_ms: number;
  step_ms_lo: number;
  step_ms_hi: number;
  memory_bytes: number;
}
/** The calibration cache's correction of a device after a measured loop. */
export interface Correction {
  time: number;
  memory: number;
  runs: number;
}
/** What a top-level `train` loop's steps measured (docs/telemetry.md). */
export interface StepMeasuredEvent extends Common {
  type: "step_measured";
  loop: number;
  /** Lines (1-based, inclusive) of the `train` statement in the document; 0 when unknown. */
  start_line: number;
  end_line: number;
  device: string;
  /** "captured" or "eager". */
  mode: string;
  step: number;
  total: number;
  measured_steps: number;
  /** Median milliseconds per measured step, and its 10th and 90th percentiles. */
  step_ms: number;
  step_ms_lo: number;
  step_ms_hi: number;
  peak_rss_bytes: number | null;
  device_peak_bytes: number | null;
  step_peak_bytes: number | null;
  eta_s: number;
  done: boolean;
  estimate: MeasuredEstimate | null;
  correction: Correction | null;
}
/** The run's value. */
export interface ValueEvent extends Common {
  type: "value";
  name: string | null;
  kind: string;
  shape: number[] | null;
  named_shape: string | null;
  dtype: string | null;
  preview: string;
  text: string;
  truncated: boolean;
}
/** A chart or other file produced by the run. */
export interface ArtifactEvent extends Common {
  type: "artifact";
  kind: string;
  path: string | null;
  content: string | null;
  bytes: number;
}
/** A warning. */
export interface WarningEvent extends Common {
  type: "warning";
  diagnostic: RunDiagnostic;
}
/** The run ended. */
export interface RunFinishedEvent extends Common {
  type: "run_finished";
  status: "ok" | "error" | "cancelled";
  elapsed_ms: number;
  diagnostic: RunDiagnostic | null;
  saved: boolean | null;
  /** The run's device counters; null when nothing was evaluated (or an older runner). */
  counters: Counters | null;
  /** The session's memory after the run; null from older runners. */
  memory: { live_bytes: number; budget_bytes: number | null } | null;
}
/** An event type this client does not know (ignored). */
export interface UnknownEvent extends Common {
  type: "unknown";
  name: string;
}

/** Every telemetry event. */
export type TelemetryEvent =
  | RunStartedEvent
  | OutputEvent
  | StepEvent
  | DeviceEvent
  | StepMeasuredEvent
  | ValueEvent
  | ArtifactEvent
  | WarningEvent
  | RunFinishedEvent
  | UnknownEvent;

type Obj = Record<string, unknown>;

const isObj = (x: unknown): x is Obj => typeof x === "object" && x !== null && !Array.isArray(x);
const num = (x: unknown): number | undefined => (typeof x === "number" && Number.isFinite(x) ? x : undefined);
const numOrNull = (x: unknown): number | null => num(x) ?? null;
const str = (x: unknown): string | undefined => (typeof x === "string" ? x : undefined);
const strOrNull = (x: unknown): string | null => str(x) ?? null;

/** Reads a diagnostic object; undefined if it lacks a code or message. */
export function parseDiagnostic(x: unknown): RunDiagnostic | undefined {
  if (!isObj(x)) {
    return undefined;
  }
  const code = str(x.code);
  const message = str(x.message);
  if (code === undefined || message === undefined) {
    return undefined;
  }
  return {
    code,
    severity: x.severity === "warning" ? "warning" : "error",
    message,
    file: strOrNull(x.file),
    line: numOrNull(x.line),
    column: numOrNull(x.column),
    end_line: numOrNull(x.end_line),
    end_column: numOrNull(x.end_column),
    label: strOrNull(x.label),
    notes: Array.isArray(x.notes) ? x.notes.filter((n): n is string => typeof n === "string") : [],
    help: strOrNull(x.help),
  };
}

function parseCounters(x: unknown): Counters {
  const o = isObj(x) ? x : {};
  return {
    uploads: num(o.uploads) ?? 0,
    downloads: num(o.downloads) ?? 0,
    bytes_up: num(o.bytes_up) ?? 0,
    bytes_down: num(o.bytes_down) ?? 0,
    kernel_launches: num(o.kernel_launches) ?? 0,
    cpu_fallbacks: num(o.cpu_fallbacks) ?? 0,
    ...(num(o.evaluations) !== undefined ? { evaluations: num(o.evaluations) } : {}),
  };
}

function parseEstimate(x: unknown): MeasuredEstimate | null {
  if (!isObj(x)) {
    return null;
  }
  const stepMs = num(x.step_ms);
  const memory = num(x.memory_bytes);
  if (stepMs === undefined || memory === undefined) {
    return null;
  }
  return { step_ms: stepMs, step_ms_lo: num(x.step_ms_lo) ?? stepMs, step_ms_hi: num(x.step_ms_hi) ?? stepMs, memory_bytes: memory };
}

function parseCorrection(x: unknown): Correction | null {
  if (!isObj(x)) {
    return null;
  }
  const time = num(x.time);
  const memory = num(x.memory);
  return time === undefined || memory === undefined ? null : { time, memory, runs: num(x.runs) ?? 0 };
}

/** Validates one decoded event; undefined when a required field is missing. */
export function parseEvent(x: unknown): TelemetryEvent | undefined {
  if (!isObj(x)) {
    return undefined;
  }
  const v = num(x.v);
  const session = str(x.session);
  const run = str(x.run);
  const seq = num(x.seq);
  const time = num(x.time) ?? 0;
  const type = str(x.type);
  if (v === undefined || session === undefined || run === undefined || seq === undefined || type === undefined) {
    return undefined;
  }
  const c: Common = { v, session, run, seq, time };
  switch (type) {
    case "run_started": {
      const cell = isObj(x.cell) && str(x.cell.uri) !== undefined
        ? { uri: str(x.cell.uri)!, index: num(x.cell.index) ?? 0, start_line: num(x.cell.start_line) ?? 0 }
        : null;
      return {
        ...c,
        type,
        cell,
        start_line: num(x.start_line) ?? 1,
        end_line: num(x.end_line) ?? 1,
        device: str(x.device) ?? "cpu",
      };
    }
    case "output":
      return { ...c, type, stream: str(x.stream) ?? "stdout", text: str(x.text) ?? "" };
    case "step": {
      const step = num(x.step);
      const total = num(x.total);
      if (step === undefined || total === undefined) {
        return undefined;
      }
      return {
        ...c,
        type,
        loop: num(x.loop) ?? 0,
        depth: num(x.depth) ?? 1,
        step,
        total,
        loss: numOrNull(x.loss),
        lr: numOrNull(x.lr),
        step_ms: num(x.step_ms) ?? 0,
        items_per_s: numOrNull(x.items_per_s),
      };
    }
    case "device":
      return {
        ...c,
        type,
        device: str(x.device) ?? "cpu",
        counters: parseCounters(x.counters),
        memory_bytes: num(x.memory_bytes) ?? 0,
        peak_memory_bytes: num(x.peak_memory_bytes) ?? 0,
        step_mode: strOrNull(x.step_mode),
        step_mode_reason: strOrNull(x.step_mode_reason),
        step_arena_bytes: numOrNull(x.step_arena_bytes),
        step_eager_peak_bytes: numOrNull(x.step_eager_peak_bytes),
      };
    case "step_measured": {
      const step = num(x.step);
      const total = num(x.total);
      const stepMs = num(x.step_ms);
      if (step === undefined || total === undefined || stepMs === undefined) {
        return undefined;
      }
      return {
        ...c,
        type,
        loop: num(x.loop) ?? 0,
        start_line: num(x.start_line) ?? 0,
        end_line: num(x.end_line) ?? 0,
        device: str(x.device) ?? "cpu",
        mode: str(x.mode) ?? "eager",
        step,
        total,
        measured_steps: num(x.measured_steps) ?? 0,
        step_ms: stepMs,
        step_ms_lo: num(x.step_ms_lo) ?? stepMs,
        step_ms_hi: num(x.step_ms_hi) ?? stepMs,
        peak_rss_bytes: numOrNull(x.peak_rss_bytes),
        device_peak_bytes: numOrNull(x.device_peak_bytes),
        step_peak_bytes: numOrNull(x.step_peak_bytes),
        eta_s: num(x.eta_s) ?? Math.max(0, total - step) * stepMs / 1000,
        done: x.done === true,
        estimate: parseEstimate(x.estimate),
        correction: parseCorrection(x.correction),
      };
    }
    case "value":
      return {
        ...c,
        type,
        name: strOrNull(x.name),
        kind: str(x.kind) ?? "array",
        shape: Array.isArray(x.shape) ? x.shape.filter((d): d is number => typeof d === "number") : null,
        named_shape: strOrNull(x.named_shape),
        dtype: strOrNull(x.dtype),
        preview: str(x.preview) ?? "",
        text: str(x.text) ?? "",
        truncated: x.truncated === true,
      };
    case "artifact":
      return {
        ...c,
        type,
        kind: str(x.kind) ?? "svg",
        path: strOrNull(x.path),
        content: strOrNull(x.content),
        bytes: num(x.bytes) ?? 0,
      };
    case "warning": {
      const diagnostic = parseDiagnostic(x.diagnostic);
      return diagnostic ? { ...c, type, diagnostic } : undefined;
    }
    case "run_finished": {
      const status = x.status === "ok" || x.status === "error" || x.status === "cancelled" ? x.status : undefined;
      if (status === undefined) {
        return undefined;
      }
      return {
        ...c,
        type,
        status,
        elapsed_ms: num(x.elapsed_ms) ?? 0,
        diagnostic: parseDiagnostic(x.diagnostic) ?? null,
        saved: typeof x.saved === "boolean" ? x.saved : null,
        counters: isObj(x.counters) ? parseCounters(x.counters) : null,
        memory: isObj(x.memory) && num(x.memory.live_bytes) !== undefined
          ? { live_bytes: num(x.memory.live_bytes)!, budget_bytes: numOrNull(x.memory.budget_bytes) }
          : null,
      };
    }
    default:
      return { ...c, type: "unknown", name: type };
  }
}

/** Parses the `data` of an SSE message; undefined for invalid JSON or events. */
export function parseEventData(data: string): TelemetryEvent | undefined {
  try {
    return parseEvent(JSON.parse(data));
  } catch {
    return undefined;
  }
}

/** A 0-based, end-exclusive range in a document. */
export interface LineRange {
  startLine: number;
  startCol: number;
  endLine: number;
  endCol: number;
}

/**
 * The document range of a run diagnostic (its 1-based, end-exclusive lines and
 * columns, already shifted to the document by the runner). Without a position it
 * falls back to the first line of the run (`fallbackLine`, 0-based).
 */
export function diagnosticRange(d: RunDiagnostic, fallbackLine: number): LineRange {
  if (d.line === null || d.column === null) {
    return { startLine: fallbackLine, startCol: 0, endLine: fallbackLine, endCol: Number.MAX_SAFE_INTEGER };
  }
  const startLine = Math.max(0, d.line - 1);
  const startCol = Math.max(0, d.column - 1);
  let endLine = d.end_line !== null ? Math.max(0, d.end_line - 1) : startLine;
  let endCol = d.end_column !== null ? Math.max(0, d.end_column - 1) : startCol + 1;
  if (endLine < startLine || (endLine === startLine && endCol <= startCol)) {
    endLine = startLine;
    endCol = startCol + 1;
  }
  return { startLine, startCol, endLine, endCol };
}
