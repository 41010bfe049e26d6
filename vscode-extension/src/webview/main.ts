/**
 * The telemetry panel's page: keeps the session model from the extension's
 * messages (the same `applyEvent` as the extension host), and draws the selected
 * run: loss curves (raw faded, bias-corrected EMA smoothed on the full series,
 * then downsampled), optional log scale, comparison with other runs, steps/s and
 * ETA, device counters and memory, warnings, printed values, SVG artifacts, the
 * timeline of a run traced with "Run Cell with Trace" (statements linked to their
 * lines), run history and a Cancel button.
 */

import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";
import "./panel.css";
import type { TelemetryEvent } from "../core/events";
import { comparisonChart } from "../core/chartData";
import { formatBytes, formatDuration, formatLoss, formatRate, stepModeText } from "../core/format";
import { measuredText } from "../core/measured";
import { applyEvent, emptySession, loopProgress, type RunRecord, type SessionModel } from "../core/runModel";
import { barGeometry, formatMicros, parseTimeline, revealRequest, type TimelineView } from "../core/timeline";

declare function acquireVsCodeApi(): { postMessage(m: unknown): void; getState(): unknown; setState(s: unknown): void };
const vscode = acquireVsCodeApi();

interface Options {
  smoothing: number;
  maxPoints: number;
  logScale: boolean;
}

let model: SessionModel = emptySession();
let options: Options = { smoothing: 0.6, maxPoints: 1000, logScale: false };
let selected: string | null = null; // run id shown; null = follow the newest
const compare = new Set<string>();
let stepEvents = 0;
let chart: uPlot | undefined;
let scheduled = false;

const app = document.getElementById("app") as HTMLElement;

function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    e.setAttribute(k, v);
  }
  for (const c of children) {
    e.append(c);
  }
  return e;
}

function cssVar(name: string, fallback: string): string {
  return getComputedStyle(document.body).getPropertyValue(name).trim() || fallback;
}

function withAlpha(color: string, alpha: number): string {
  const m = /^#([0-9a-f]{6})/i.exec(color);
  if (m) {
    const n = parseInt(m[1], 16);
    return `rgba(${(n >> 16) & 255}, ${(n >> 8) & 255}, ${n & 255}, ${alpha})`;
  }
  return color;
}

function shownRun(): RunRecord | undefined {
  if (selected) {
    const r = model.runs.find((x) => x.id === selected);
    if (r) {
      return r;
    }
  }
  return model.runs[model.runs.length - 1];
}

function runTitle(r: RunRecord): string {
  const where = r.cell ? `cell ${r.cell.index} (lines ${r.startLine}–${r.endLine})` : `lines ${r.startLine}–${r.endLine}`;
  return `${where} · ${r.device}`;
}

function stat(k: string, v: string): HTMLElement {
  return el("div", { class: "stat" }, el("span", { class: "k" }, k), el("span", { class: "v" }, v));
}

function lastLoss(r: RunRecord): number | null {
  const l = r.loops[r.loops.length - 1];
  return l ? l.losses[l.losses.length - 1] ?? null : null;
}

function isDecade(v: number): boolean {
  const e = Math.log10(v);
  return Math.abs(e - Math.round(e)) < 1e-9;
}

function decades(_u: uPlot, splits: number[]): (number | null)[] {
  return splits.map((v) => (isDecade(v) ? v : null));
}

/** `0.001` … `10000` plainly, `1e-7` beyond. */
function decadeLabel(v: number): string {
  const e = Math.round(Math.log10(v));
  return e >= -3 && e <= 4 ? String(Number(v.toPrecision(1))) : `1e${e}`;
}

function drawChart(host: HTMLElement, run: RunRecord): void {
  chart?.destroy();
  chart = undefined;
  const loop = run.loops[run.loops.length - 1];
  if (!loop) {
    host.append(el("p", { class: "muted" }, "No train loop in this run."));
    return;
  }
  const fg = cssVar("--vscode-foreground", "#ccc");
  const grid = cssVar("--vscode-editorWidget-border", "#444");
  const rawColor = cssVar("--vscode-charts-blue", "#3794ff");
  const others = [cssVar("--vscode-charts-orange", "#d18616"), cssVar("--vscode-charts-green", "#89d185"), cssVar("--vscode-charts-purple", "#b180d7"), cssVar("--vscode-charts-red", "#f14c4c")];
  const compared = model.runs
    .filter((r) => r.id !== run.id && compare.has(r.id) && r.loops.length)
    .map((r) => ({ id: r.id, loop: r.loops[r.loops.length - 1] }));
  const c = comparisonChart(loop, compared, options.smoothing, options.maxPoints);
  const log = options.logScale && c.logScaleOk;
  const data: uPlot.AlignedData = [c.x, c.raw, c.smooth, ...c.compared.map((k) => k.smooth)];
  const axis = { stroke: fg, grid: { stroke: withAlpha(grid, 0.5), width: 1 }, ticks: { stroke: grid } };
  const opts: uPlot.Options = {
    width: Math.max(300, host.clientWidth || 600),
    height: 260,
    scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
    axes: [
      { ...axis, label: "step" },
      log
        ? {
            ...axis,
            label: "loss (log)",
            size: 70,
            // Decades only: uPlot's log splits include 2…9 × 10^k, too dense to label.
            filter: decades,
            grid: { ...axis.grid, filter: decades },
            ticks: { ...axis.ticks, filter: decades },
            values: (_u: uPlot, splits: number[]) => splits.map((v) => (v === null ? "" : decadeLabel(v))),
          }
        : { ...axis, label: "loss", size: 60 },
    ],
    series: [
      { label: "step" },
      { label: "loss", stroke: withAlpha(rawColor, 0.35), width: 1, spanGaps: true, points: { show: false } },
      { label: `smoothed (${options.smoothing})`, stroke: rawColor, width: 2, spanGaps: true, points: { show: false } },
      ...c.compared.map((k, i) => ({ label: `${k.id.slice(0, 8)} smoothed`, stroke: others[i % others.length], width: 1.5, spanGaps: true, points: { show: false } })),
    ],
    legend: { show: true },
    cursor: { drag: { x: true, y: false } },
  };
  chart = new uPlot(opts, data, host);
}

function render(): void {
  scheduled = false;
  const run = shownRun();
  app.replaceChildren();
  if (!run) {
    app.append(el("p", { class: "muted" }, "No run yet. Use ▶ Run Cell on a train block."));
    report(undefined);
    return;
  }
  // Header: status, where, Cancel.
  const header = el("h2", {}, el("span", { class: `badge ${run.status}` }, run.status), " ", runTitle(run));
  if (run.status === "running") {
    const cancel = el("button", { id: "cancel" }, "Cancel");
    cancel.addEventListener("click", () => {
      cancel.disabled = true;
      cancel.textContent = "Cancelling…";
      vscode.postMessage({ type: "cancel" });
    });
    header.append(" ", cancel);
  }
  app.append(header);
  // Progress.
  const loop = run.loops[run.loops.length - 1];
  const stats = el("div", { class: "row" });
  if (loop) {
    const p = loopProgress(loop);
    stats.append(
      stat("step", `${p.step} / ${p.total}`),
      stat("loss", formatLoss(loop.losses[loop.losses.length - 1] ?? null)),
      stat("speed", formatRate(p.stepsPerS)),
      stat("ETA", run.status === "running" ? (p.etaS === null ? "—" : formatDuration(p.etaS * 1000)) : "done"),
      stat("lr", loop.lastLr === null ? "—" : formatLoss(loop.lastLr)),
    );
  }
  stats.append(stat("elapsed", run.elapsedMs !== null ? formatDuration(run.elapsedMs) : formatDuration(Date.now() - run.startTime)));
  app.append(stats);
  // What the runner measured of the loop's steps, beside the estimate.
  if (loop?.measured) {
    app.append(el("p", { class: "measured" }, measuredText(loop.measured)));
  }
  // Chart controls and chart.
  const logBox = el("input", { type: "checkbox", id: "log" });
  logBox.checked = options.logScale;
  logBox.addEventListener("change", () => {
    options.logScale = logBox.checked;
    vscode.postMessage({ type: "setLogScale", value: logBox.checked });
    schedule();
  });
  if (loop) {
    const loopsNote = run.loops.length > 1 ? ` (loop ${loop.loop} of ${run.loops.length})` : "";
    app.append(el("div", { class: "row" }, el("h3", {}, `Loss${loopsNote}`), el("label", {}, logBox, " log scale")));
    const chartHost = el("div", { id: "chart" });
    app.append(chartHost);
    drawChart(chartHost, run);
  } else {
    chart?.destroy();
    chart = undefined;
  }
  // Device.
  if (run.counters) {
    const c = run.counters;
    app.append(
      el("h3", {}, `Device · ${run.device}`),
      el(
        "table",
        {},
        el("tr", {}, el("th", {}, "uploads"), el("td", {}, `${c.uploads} (${formatBytes(c.bytes_up)})`), el("th", {}, "downloads"), el("td", {}, `${c.downloads} (${formatBytes(c.bytes_down)})`)),
        el("tr", {}, el("th", {}, "kernel launches"), el("td", {}, String(c.kernel_launches)), el("th", {}, "CPU fallbacks"), el("td", {}, String(c.cpu_fallbacks))),
        // MLX is lazy: how often its graph was evaluated (host reads, optimizer updates).
        ...(run.device.startsWith("mlx") ? [el("tr", {}, el("th", {}, "evaluations"), el("td", { colspan: "3" }, String(c.evaluations ?? 0)))] : []),
        // The CPU backend does not track tensor memory (telemetry sends 0 there).
        run.device === "cpu"
          ? el("tr", {}, el("th", {}, "memory"), el("td", {}, "not tracked on the CPU"))
          : el("tr", {}, el("th", {}, "memory"), el("td", {}, formatBytes(run.memoryBytes)), el("th", {}, "peak"), el("td", {}, formatBytes(run.peakMemoryBytes))),
        ...(run.stepMode ? [el("tr", {}, el("th", {}, "train steps"), el("td", { colspan: "3" }, stepModeText(run.stepMode)))] : []),
        ...(run.stepEagerPeakBytes !== null
          ? [el("tr", {}, el("th", {}, "step memory"), el("td", { colspan: "3" }, `eager live peak ${formatBytes(run.stepEagerPeakBytes)}${run.stepArenaBytes !== null ? `, captured arena ${formatBytes(run.stepArenaBytes)}` : ""}`))]
          : []),
      ),
    );
  }
  // Diagnostics.
  if (run.diagnostic) {
    const d = run.diagnostic;
    app.append(el("h3", {}, run.status === "cancelled" ? "Cancelled" : "Error"), el("p", { class: "error" }, `${d.code} ${d.message}${d.line !== null ? ` (line ${d.line})` : ""}`));
  }
  if (run.warnings.length) {
    app.append(el("h3", {}, `Warnings (${run.warnings.length})`));
    for (const w of run.warnings) {
      app.append(el("div", { class: "warning" }, `${w.code} ${w.message}${w.line !== null ? ` (line ${w.line})` : ""}`));
    }
  }
  // Printed values and artifacts.
  // A chart's printed form is its SVG text: it is shown as the image below instead.
  const svgs = new Set(run.artifacts.map((a) => a.content?.trim()).filter(Boolean));
  const printed = run.outputs.filter((o) => !svgs.has(o.trim()));
  if (printed.length) {
    app.append(el("h3", {}, "Output"), el("pre", {}, printed.join("")));
  }
  for (const a of run.artifacts) {
    if (a.kind === "timeline" && a.content) {
      const view = parseTimeline(a.content);
      if (view) {
        drawTimeline(run, view);
      }
    } else if (a.kind === "svg" && a.content) {
      app.append(el("h3", {}, `Chart (${formatBytes(a.bytes)})`), el("img", { class: "artifact", alt: "SVG chart", src: `data:image/svg+xml;base64,${b64(a.content)}` }));
    } else if (a.path) {
      app.append(el("p", { class: "muted" }, `artifact: ${a.path}`));
    }
  }
  // History.
  if (model.runs.length > 1) {
    app.append(el("h3", {}, "Runs in this session (click to show, tick to compare)"));
    const table = el("table", { class: "history" }, el("tr", {}, el("th", {}, ""), el("th", {}, "run"), el("th", {}, "status"), el("th", {}, "where"), el("th", {}, "steps"), el("th", {}, "last loss"), el("th", {}, "time")));
    for (const r of [...model.runs].reverse()) {
      const box = el("input", { type: "checkbox" });
      box.checked = compare.has(r.id);
      box.disabled = r.id === run.id || r.loops.length === 0;
      box.addEventListener("click", (ev) => {
        ev.stopPropagation();
        if (box.checked) {
          compare.add(r.id);
        } else {
          compare.delete(r.id);
        }
        schedule();
      });
      const l = r.loops[r.loops.length - 1];
      const tr = el(
        "tr",
        r.id === run.id ? { class: "selected" } : {},
        el("td", {}, box),
        el("td", {}, r.id.slice(0, 9)),
        el("td", {}, r.status),
        el("td", {}, runTitle(r)),
        el("td", {}, l ? String(l.steps[l.steps.length - 1] ?? 0) : "—"),
        el("td", {}, formatLoss(lastLoss(r))),
        el("td", {}, r.elapsedMs !== null ? formatDuration(r.elapsedMs) : "…"),
      );
      tr.addEventListener("click", () => {
        selected = r.id === model.runs[model.runs.length - 1].id ? null : r.id;
        schedule();
      });
      table.append(tr);
    }
    app.append(table);
  }
  report(run);
}

const ROW_TITLES = ["statements", "train loops", "iterations", "kernels"];

/** The run's timeline: one strip per track, a bar per statement, loop, iteration and kernel. */
function drawTimeline(run: RunRecord, view: TimelineView): void {
  const width = Math.max(300, app.clientWidth - 24 || 600);
  app.append(el("h3", {}, `Timeline (${formatMicros(view.total)}; click a statement to show it)`));
  const host = el("div", { class: "timeline" });
  for (let row = 0; row < ROW_TITLES.length; row++) {
    const bars = view.bars.filter((b) => b.row === row);
    if (!bars.length) {
      continue;
    }
    const strip = el("div", { class: "timeline-row", "data-row": String(row) });
    strip.style.width = `${width}px`;
    for (const b of bars) {
      const g = barGeometry(view, b, width);
      const where = b.line !== null ? ` · line ${b.line}${b.endLine !== null && b.endLine !== b.line ? `–${b.endLine}` : ""}` : "";
      const bar = el("div", { class: `timeline-bar ${b.kind}${b.ok === false ? " failed" : ""}`, title: `${b.name}${where}\n${formatMicros(b.dur)} · ${b.detail}` });
      bar.style.left = `${g.x}px`;
      bar.style.width = `${g.w}px`;
      if (b.kind !== "train_step" && b.kind !== "kernel") {
        bar.append(b.name);
      }
      const reveal = revealRequest(b, run.cell?.uri);
      if (reveal) {
        bar.classList.add("link");
        bar.dataset.line = String(reveal.line);
        bar.dataset.endLine = String(reveal.endLine);
        bar.addEventListener("click", () => vscode.postMessage(reveal));
      }
      strip.append(bar);
    }
    host.append(el("div", { class: "timeline-title" }, ROW_TITLES[row]), strip);
  }
  app.append(host);
}

function b64(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(s);
}

/** Tells the extension what was drawn (tests read it). */
function report(run: RunRecord | undefined): void {
  vscode.postMessage({
    type: "rendered",
    summary: {
      runs: model.runs.length,
      run: run?.id ?? null,
      status: run?.status ?? null,
      loops: (run?.loops ?? []).map((l) => ({ loop: l.loop, points: l.steps.length, steps: l.steps, losses: l.losses, measured: l.measured ? measuredText(l.measured) : null })),
      stepEvents,
      images: app.querySelectorAll("img.artifact").length,
      timeline: app.querySelector(".timeline")
        ? {
            statements: app.querySelectorAll(".timeline-bar.statement").length,
            loops: app.querySelectorAll(".timeline-bar.train").length,
            steps: app.querySelectorAll(".timeline-bar.train_step").length,
            kernels: app.querySelectorAll(".timeline-bar.kernel").length,
          }
        : null,
    },
  });
}

function schedule(): void {
  if (!scheduled) {
    scheduled = true;
    requestAnimationFrame(render);
  }
}

window.addEventListener("message", (ev: MessageEvent) => {
  const m = ev.data as { type: string; model?: SessionModel; options?: Options; event?: TelemetryEvent };
  if (m.type === "reset" && m.model) {
    model = m.model;
    if (m.options) {
      options = m.options;
    }
    stepEvents = model.runs.reduce((n, r) => n + r.loops.reduce((k, l) => k + l.steps.length, 0), 0);
    schedule();
  } else if (m.type === "event" && m.event) {
    if (applyEvent(model, m.event)) {
      if (m.event.type === "step") {
        stepEvents++;
      }
      if (m.event.type === "run_started") {
        selected = null;
      }
      schedule();
    }
  }
});

// Redraw on theme changes (VS Code swaps the body's classes) and resizes.
new MutationObserver(schedule).observe(document.body, { attributes: true, attributeFilter: ["class"] });
let lastWidth = 0;
new ResizeObserver(() => {
  if (Math.abs(app.clientWidth - lastWidth) > 20) {
    lastWidth = app.clientWidth;
    schedule();
  }
}).observe(app);

vscode.postMessage({ type: "ready" });
