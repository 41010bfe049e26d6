/**
 * The cell commands: Run Cell (from a code lens with `{uri, range, cellIndex}` or
 * from the cursor), Run Cell with Trace (the same, with the run's timeline shown in
 * the panel), Run Cell and Advance (Shift+Enter), Run Above, Run All.
 */

import * as vscode from "vscode";
import { cellAtLine, cellRanges, cellText, nextCellLine, type CellRange } from "./core/cells";
import type { CellJob, RunnerController } from "./runnerController";

/** The arguments the language server puts on its Run lenses. */
interface LensArgs {
  uri: string;
  range?: { start: { line: number; character: number }; end: { line: number; character: number } };
  cellIndex: number;
}

function isLensArgs(x: unknown): x is LensArgs {
  return typeof x === "object" && x !== null && typeof (x as LensArgs).uri === "string" && typeof (x as LensArgs).cellIndex === "number";
}

/** The document and cell a command applies to. */
async function target(args: unknown): Promise<{ doc: vscode.TextDocument; cells: CellRange[]; cell: CellRange; lensRange?: vscode.Range } | undefined> {
  let doc: vscode.TextDocument;
  let cell: CellRange;
  let cells: CellRange[];
  let lensRange: vscode.Range | undefined;
  if (isLensArgs(args)) {
    doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(args.uri));
    cells = cellRanges(doc.getText());
    if (args.range) {
      lensRange = new vscode.Range(args.range.start.line, args.range.start.character, args.range.end.line, args.range.end.character);
    }
    cell = cells.find((c) => c.index === args.cellIndex) ?? cellAtLine(cells, lensRange?.start.line ?? 0);
  } else {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.document.languageId !== "mlpl") {
      void vscode.window.showWarningMessage("MLPL: open an .mlpl file to run its cells.");
      return undefined;
    }
    doc = editor.document;
    cells = cellRanges(doc.getText());
    cell = cellAtLine(cells, editor.selection.active.line);
  }
  return { doc, cells, cell, lensRange };
}

function job(doc: vscode.TextDocument, cell: CellRange, lensRange?: vscode.Range): CellJob {
  const code = lensRange ? doc.getText(lensRange) : cellText(doc.getText(), cell);
  const startLine = lensRange ? lensRange.start.line : cell.startLine;
  return { code, cell: { uri: doc.uri.toString(), index: cell.index, start_line: startLine } };
}

async function runJobs(runner: RunnerController, jobs: CellJob[], onStart: () => void): Promise<void> {
  onStart();
  try {
    await runner.runCells(jobs);
  } catch (e) {
    void vscode.window.showErrorMessage(`MLPL: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/** Registers the cell commands. `onRun` is called when a run is about to start. */
export function registerCellCommands(runner: RunnerController, onRun: () => void): vscode.Disposable[] {
  return [
    vscode.commands.registerCommand("mlpl.runCell", async (args?: unknown) => {
      const t = await target(args);
      if (t) {
        await runJobs(runner, [job(t.doc, t.cell, t.lensRange)], onRun);
      }
    }),
    vscode.commands.registerCommand("mlpl.runCellWithTrace", async (args?: unknown) => {
      const t = await target(args);
      if (t) {
        await runJobs(runner, [{ ...job(t.doc, t.cell, t.lensRange), timeline: true }], onRun);
      }
    }),
    vscode.commands.registerCommand("mlpl.runCellAndAdvance", async () => {
      const t = await target(undefined);
      if (!t) {
        return;
      }
      const editor = vscode.window.activeTextEditor;
      const next = nextCellLine(t.cells, t.cell.index);
      if (editor && next !== undefined) {
        const p = new vscode.Position(next, 0);
        editor.selection = new vscode.Selection(p, p);
        editor.revealRange(new vscode.Range(p, p));
      }
      await runJobs(runner, [job(t.doc, t.cell)], onRun);
    }),
    vscode.commands.registerCommand("mlpl.runAbove", async (args?: unknown) => {
      const t = await target(args);
      if (!t) {
        return;
      }
      const above = t.cells.filter((c) => c.index < t.cell.index);
      if (above.length === 0) {
        void vscode.window.showInformationMessage("MLPL: there is no cell above this one.");
        return;
      }
      await runJobs(runner, above.map((c) => job(t.doc, c)), onRun);
    }),
    vscode.commands.registerCommand("mlpl.runAll", async (args?: unknown) => {
      const t = await target(args);
      if (t) {
        await runJobs(runner, t.cells.map((c) => job(t.doc, c)), onRun);
      }
    }),
  ];
}
