/**
 * The timeline of a run traced with "Run Cell with Trace": the runner sends the
 * run's Chrome Trace Event file (docs/traces.md) as an `artifact` event of kind
 * `timeline`; this turns it into the bars the panel draws, one row per track
 * (statements, train loops, their iterations and kernels), each statement linked
 * to its document lines. Plain data, no DOM, so it is unit-tested.
 */

/** One bar of the timeline. */
export interface TimelineBar {
  /** `statement`, `train` (a loop), `train_step` (an iteration) or `kernel`. */
  kind: "statement" | "train" | "train_step" | "kernel";
  name: string;
  /** Start and duration in microseconds since the run started. */
  ts: number;
  dur: number;
  /** Row: 0 statements, 1 train loops, 2 iterations, 3 kernels. */
  row: number;
  /** The statement's first and last document lines (1-based), when a statement. */
  line: number | null;
  endLine: number | null;
  /** Whether the statement succeeded (statements only). */
  ok: boolean | null;
  /** Kernels the statement ran, the iteration's loss, or a kernel's input shapes. */
  detail: string;
}

/** The timeline of one run. */
export interface TimelineView {
  /** End of the last bar, in microseconds. */
  total: number;
  bars: TimelineBar[];
  /** Counter samples (`ph: "C"`) in the file. */
  counterSamples: number;
  /** Kernel events in the file (at most {@link MAX_KERNEL_BARS} of them are bars). */
  kernels: number;
}

/** The most kernel bars drawn: a long run has far more kernels than a strip has pixels. */
export const MAX_KERNEL_BARS = 5000;

type TraceEvent = { ph?: unknown; cat?: unknown; name?: unknown; ts?: unknown; dur?: unknown; args?: Record<string, unknown> };

const ROWS: Record<TimelineBar["kind"], number> = { statement: 0, train: 1, train_step: 2, kernel: 3 };

/** `[[4, 4], [4, 4]]` as `4×4, 4×4`. */
function shapesText(inputs: unknown): string {
  if (!Array.isArray(inputs)) {
    return "";
  }
  return inputs.map((s) => (Array.isArray(s) ? (s.length ? s.join("×") : "scalar") : "?")).join(", ");
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Reads a timeline artifact's content; `null` if it is not a trace event file. */
export function parseTimeline(content: string): TimelineView | null {
  let json: unknown;
  try {
    json = JSON.parse(content);
  } catch {
    return null;
  }
  const events = (json as { traceEvents?: unknown }).traceEvents;
  if (!Array.isArray(events)) {
    return null;
  }
  const bars: TimelineBar[] = [];
  let counterSamples = 0;
  let kernels = 0;
  let total = 0;
  for (const e of events as TraceEvent[]) {
    if (e.ph === "C") {
      counterSamples++;
      continue;
    }
    if (e.ph !== "X" || (e.cat !== "statement" && e.cat !== "train" && e.cat !== "train_step" && e.cat !== "kernel")) {
      continue;
    }
    if (e.cat === "kernel" && ++kernels > MAX_KERNEL_BARS) {
      continue;
    }
    const ts = num(e.ts);
    const dur = num(e.dur);
    if (ts === null || dur === null) {
      continue;
    }
    const kind = e.cat;
    const args = e.args ?? {};
    const line = kind === "statement" ? num(args.line) : null;
    const endLine = kind === "statement" ? num(args.end_line) : null;
    let detail = "";
    if (kind === "statement") {
      detail = `${num(args.kernel_launches) ?? 0} kernels`;
    } else if (kind === "kernel") {
      detail = shapesText(args.inputs);
    } else if (kind === "train_step") {
      const loss = num(args.loss);
      detail = loss === null ? "loss —" : `loss ${loss.toPrecision(5)}`;
    } else {
      detail = `${num(args.completed) ?? 0}/${num(args.total) ?? 0} steps${typeof args.step_mode === "string" ? `, ${args.step_mode}` : ""}`;
    }
    bars.push({
      kind,
      name: typeof e.name === "string" ? e.name : "",
      ts,
      dur,
      row: ROWS[kind],
      line,
      endLine,
      ok: kind === "statement" ? args.ok === true : null,
      detail,
    });
    total = Math.max(total, ts + dur);
  }
  return { total, bars, counterSamples, kernels };
}

/** Where a bar lies in a strip `width` pixels wide (at least 1 px wide). */
export function barGeometry(view: TimelineView, bar: TimelineBar, width: number): { x: number; w: number } {
  const scale = view.total > 0 ? width / view.total : 0;
  const x = Math.min(width - 1, Math.max(0, bar.ts * scale));
  return { x, w: Math.max(1, Math.min(width - x, bar.dur * scale)) };
}

/** `12.3 ms`, `850 µs`, `2.10 s`. */
export function formatMicros(us: number): string {
  if (us >= 1e6) {
    return `${(us / 1e6).toFixed(2)} s`;
  }
  if (us >= 1e3) {
    return `${(us / 1e3).toFixed(1)} ms`;
  }
  return `${Math.round(us)} µs`;
}

/** What clicking a statement bar asks the extension to show: its document and lines (1-based). */
export interface RevealRequest {
  type: "reveal";
  uri: string;
  line: number;
  endLine: number;
}

/** The request a click on `bar` sends, or `null` when it is no statement of a document. */
export function revealRequest(bar: TimelineBar, uri: string | undefined): RevealRequest | null {
  if (bar.kind !== "statement" || bar.line === null || !uri) {
    return null;
  }
  const line = Math.max(1, Math.floor(bar.line));
  const endLine = Math.max(line, Math.floor(bar.endLine ?? line));
  return { type: "reveal", uri, line, endLine };
}

/**
 * The 0-based selection that shows lines `line`–`endLine` (1-based) of a document
 * of `lineCount` lines: from the start of the first to the end of the last, both
 * clamped to the document (an edited document may have fewer lines now).
 */
export function revealSelection(
  line: number,
  endLine: number,
  lineCount: number,
  lineLength: (line: number) => number,
): { startLine: number; endLine: number; endCharacter: number } {
  const last = Math.max(0, lineCount - 1);
  const startLine = Math.min(last, Math.max(0, line - 1));
  const end = Math.min(last, Math.max(startLine, endLine - 1));
  return { startLine, endLine: end, endCharacter: lineLength(end) };
}
