/**
 * What runs show in the editor: a status decoration on each cell's first line
 * (spinner with the step while running, ✓ with the elapsed time, ✗ with the
 * error), the cell's last value after its last line, and the errors and warnings
 * of runs as diagnostics of their own source (`mlpl run`), next to the static
 * checker's (`mlpl`).
 */

import * as vscode from "vscode";
import { diagnosticRange, type RunDiagnostic } from "./core/events";
import { ellipsize, formatDuration } from "./core/format";
import { loopProgress, type RunRecord } from "./core/runModel";
import type { RunnerController } from "./runnerController";
import { settings } from "./settings";

const SPINNER = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];

/** The source name of run diagnostics. */
export const RUN_SOURCE = "mlpl run";

/** Decorations and diagnostics for the runs of the session. */
export class EditorFeedback implements vscode.Disposable {
  private readonly status = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", fontStyle: "italic" },
    isWholeLine: true,
  });
  /** Gutter marks per status (the text after the line can be scrolled out of view). */
  private readonly gutter: Record<RunRecord["status"], vscode.TextEditorDecorationType>;
  private readonly value = vscode.window.createTextEditorDecorationType({
    after: { margin: "0 0 0 2em", color: new vscode.ThemeColor("editorCodeLens.foreground") },
  });
  private readonly diagnostics = vscode.languages.createDiagnosticCollection(RUN_SOURCE);
  private readonly subs: vscode.Disposable[];
  private timer: ReturnType<typeof setInterval> | undefined;
  private frame = 0;

  constructor(
    private readonly runner: RunnerController,
    extensionUri: vscode.Uri,
  ) {
    const icon = (name: string) =>
      vscode.window.createTextEditorDecorationType({ gutterIconPath: vscode.Uri.joinPath(extensionUri, "images", `cell-${name}.svg`), gutterIconSize: "70%" });
    this.gutter = { running: icon("running"), ok: icon("ok"), error: icon("error"), cancelled: icon("cancelled") };
    this.subs = [
      runner.onEvent(({ event, run }) => {
        if (event.type === "run_started" || event.type === "run_finished" || event.type === "warning") {
          this.updateDiagnostics(run);
        }
        this.refresh();
      }),
      runner.onDidReset(() => {
        this.diagnostics.clear();
        this.refresh();
      }),
      vscode.window.onDidChangeVisibleTextEditors(() => this.refresh()),
      vscode.workspace.onDidChangeTextDocument((e) => {
        // Edited cells keep their marks; the positions move with the lines they are on.
        if (e.document.languageId === "mlpl" && e.contentChanges.some((c) => c.text.includes("\n") || c.range.start.line !== c.range.end.line)) {
          this.refresh();
        }
      }),
    ];
  }

  /** The newest run of each cell of a document (by cell index). */
  private latestRuns(uri: string): RunRecord[] {
    const byCell = new Map<number, RunRecord>();
    for (const r of this.runner.model.runs) {
      if (r.cell && r.cell.uri === uri) {
        byCell.set(r.cell.index, r);
      }
    }
    return [...byCell.values()];
  }

  /** Redraws every visible MLPL editor. */
  refresh(): void {
    let running = false;
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.languageId !== "mlpl") {
        continue;
      }
      const statusOpts: vscode.DecorationOptions[] = [];
      const gutterOpts: Record<RunRecord["status"], vscode.Range[]> = { running: [], ok: [], error: [], cancelled: [] };
      const valueOpts: vscode.DecorationOptions[] = [];
      const lines = editor.document.lineCount;
      for (const r of this.latestRuns(editor.document.uri.toString())) {
        const first = Math.min(lines - 1, Math.max(0, r.startLine - 1));
        const { text, color, hover } = this.statusText(r);
        running ||= r.status === "running";
        gutterOpts[r.status].push(new vscode.Range(first, 0, first, 0));
        statusOpts.push({
          range: new vscode.Range(first, 0, first, 0),
          renderOptions: { after: { contentText: text, color } },
          hoverMessage: hover,
        });
        if (r.value && r.status === "ok" && settings().inlineValues) {
          const last = lastCodeLine(editor.document, first, Math.min(lines - 1, r.endLine - 1));
          const shape = r.value.namedShape && r.value.namedShape !== "[]" ? `${r.value.namedShape} ` : "";
          const name = r.value.name ? `${r.value.name} = ` : "";
          valueOpts.push({
            range: new vscode.Range(last, Number.MAX_SAFE_INTEGER, last, Number.MAX_SAFE_INTEGER),
            renderOptions: { after: { contentText: `→ ${name}${shape}${ellipsize(r.value.preview, 60)}` } },
            hoverMessage: new vscode.MarkdownString().appendCodeblock(r.value.text.slice(0, 4000), "text"),
          });
        }
      }
      editor.setDecorations(this.status, statusOpts);
      editor.setDecorations(this.value, valueOpts);
      for (const status of Object.keys(this.gutter) as RunRecord["status"][]) {
        editor.setDecorations(this.gutter[status], gutterOpts[status]);
      }
    }
    if (running && !this.timer) {
      this.timer = setInterval(() => {
        this.frame = (this.frame + 1) % SPINNER.length;
        this.refresh();
      }, 120);
    } else if (!running && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private statusText(r: RunRecord): { text: string; color: vscode.ThemeColor; hover: vscode.MarkdownString } {
    const hover = new vscode.MarkdownString();
    hover.appendMarkdown(`run \`${r.id}\` on ${r.device}`);
    switch (r.status) {
      case "running": {
        const loop = r.loops[r.loops.length - 1];
        const p = loop ? loopProgress(loop) : undefined;
        const text = `${SPINNER[this.frame]} running${p ? ` · step ${p.step}/${p.total}` : ""}`;
        return { text, color: new vscode.ThemeColor("editorInfo.foreground"), hover };
      }
      case "ok":
        return { text: `✓ ${formatDuration(r.elapsedMs ?? 0)}`, color: new vscode.ThemeColor("testing.iconPassed"), hover };
      case "cancelled":
        return { text: `■ cancelled after ${formatDuration(r.elapsedMs ?? 0)}`, color: new vscode.ThemeColor("editorWarning.foreground"), hover };
      case "error": {
        const d = r.diagnostic;
        if (d) {
          hover.appendMarkdown(`\n\n**${d.code}** ${d.message}`);
        }
        const text = `✗ ${d ? `${d.code} ${ellipsize(d.message, 80)}` : "failed"}`;
        return { text, color: new vscode.ThemeColor("editorError.foreground"), hover };
      }
    }
  }

  private updateDiagnostics(run: RunRecord): void {
    if (!run.cell) {
      return;
    }
    const uri = vscode.Uri.parse(run.cell.uri);
    // Keep the diagnostics of other cells' latest runs; replace this cell's.
    const keep = (this.diagnostics.get(uri) ?? []).filter((d) => (d as CellDiagnostic).cellIndex !== run.cell!.index);
    const mine = [...run.warnings, ...(run.diagnostic && run.status === "error" ? [run.diagnostic] : [])].map((d) =>
      toDiagnostic(d, run.startLine - 1, run.cell!.index),
    );
    this.diagnostics.set(uri, [...keep, ...mine]);
  }

  dispose(): void {
    if (this.timer) {
      clearInterval(this.timer);
    }
    for (const s of this.subs) {
      s.dispose();
    }
    this.status.dispose();
    this.value.dispose();
    for (const g of Object.values(this.gutter)) {
      g.dispose();
    }
    this.diagnostics.dispose();
  }
}

interface CellDiagnostic extends vscode.Diagnostic {
  cellIndex: number;
}

function toDiagnostic(d: RunDiagnostic, fallbackLine: number, cellIndex: number): CellDiagnostic {
  const r = diagnosticRange(d, fallbackLine);
  const diag = new vscode.Diagnostic(
    new vscode.Range(r.startLine, r.startCol, r.endLine, Math.min(r.endCol, 1e6)),
    [d.message, d.label, ...d.notes, d.help ? `help: ${d.help}` : null].filter(Boolean).join("\n"),
    d.severity === "warning" ? vscode.DiagnosticSeverity.Warning : vscode.DiagnosticSeverity.Error,
  ) as CellDiagnostic;
  diag.source = RUN_SOURCE;
  diag.code = d.code;
  diag.cellIndex = cellIndex;
  return diag;
}

/** The last line in [first, last] that is not blank (where the value goes). */
function lastCodeLine(doc: vscode.TextDocument, first: number, last: number): number {
  for (let l = last; l > first; l--) {
    if (!doc.lineAt(l).isEmptyOrWhitespace) {
      return l;
    }
  }
  return first;
}
