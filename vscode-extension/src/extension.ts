/**
 * MLPL Studio for VS Code: the entry point. Wires the language client
 * (`mlpl-lsp`), the runner (`mlpl serve`) and what shows runs: the telemetry
 * panel, cell decorations, run diagnostics, the status bar, the Variables view
 * and the `MLPL Runner` output channel. `activate` returns a small API that the
 * end-to-end test reads.
 */

import * as vscode from "vscode";
import { registerCellCommands } from "./cellCommands";
import type { RunRecord, SessionModel } from "./core/runModel";
import { measuredNotification } from "./core/measured";
import { EditorFeedback } from "./editorFeedback";
import { LanguageClientHost } from "./languageClient";
import { TelemetryPanel, type PanelSummary } from "./panel";
import { RunnerController } from "./runnerController";
import { RunnerStatusBar } from "./statusBar";
import { settings } from "./settings";
import { VariablesProvider } from "./variablesView";

/** What the extension exposes to other extensions and tests. */
export interface MlplApi {
  /** Resolves when the language server has started. */
  languageServerReady: Promise<void>;
  /** The session model (runs and their telemetry). */
  model(): SessionModel;
  /** Resolves with the run when it has finished. */
  waitForRun(id: string): Promise<RunRecord>;
  /** What the telemetry panel last reported drawing, if it is open. */
  panelSummary(): PanelSummary | undefined;
  /** The Variables view's top-level items. */
  variablesViewItems(): { label: string; description: string }[];
  /** The runner's state. */
  runnerState(): string;
  /** The id of the session this workspace uses, once connected. */
  session(): string | undefined;
  /** Fetches the variables again (the view refreshes itself after each run). */
  refreshVariables(): Promise<void>;
}

const DEVICES: { label: string; description: string }[] = [
  { label: "cpu", description: "the CPU backend" },
  { label: "cuda", description: "the first CUDA device" },
  { label: "cuda:0", description: "CUDA device 0" },
  { label: "cuda:1", description: "CUDA device 1" },
  { label: "mlx", description: "MLX (Metal on Apple silicon, its CPU backend on Linux)" },
];

/** Called by VS Code when an MLPL file or command is first used. */
export function activate(ctx: vscode.ExtensionContext): MlplApi {
  const log = vscode.window.createOutputChannel("MLPL Runner");
  const lsp = new LanguageClientHost(ctx);
  const runner = new RunnerController(ctx, log);
  const panel = new TelemetryPanel(ctx, runner);
  const feedback = new EditorFeedback(runner, ctx.extensionUri);
  const status = new RunnerStatusBar(runner);
  const variables = new VariablesProvider(runner);
  ctx.subscriptions.push(log, lsp, runner, panel, feedback, status, variables);
  ctx.subscriptions.push(vscode.window.registerTreeDataProvider("mlpl.variables", variables));

  // The runner's measurements of `train` loops go to the language server,
  // which shows them in the loops' lenses and hovers.
  ctx.subscriptions.push(
    runner.onEvent(({ event, run }) => {
      if (event.type === "step_measured") {
        const params = measuredNotification(event, run);
        if (params) {
          lsp.notifyMeasured(params);
        }
      }
    }),
  );

  const onRun = () => {
    if (settings().openPanelOnRun) {
      panel.show(true);
    }
  };
  ctx.subscriptions.push(
    ...registerCellCommands(runner, onRun),
    vscode.commands.registerCommand("mlpl.cancelRun", async () => {
      try {
        const cancelling = await runner.cancel();
        if (!cancelling) {
          void vscode.window.showInformationMessage("MLPL: no run in progress.");
        }
      } catch (e) {
        void vscode.window.showErrorMessage(`MLPL: ${e instanceof Error ? e.message : String(e)}`);
      }
    }),
    vscode.commands.registerCommand("mlpl.restartSession", async () => {
      try {
        await runner.restartSession();
        void vscode.window.showInformationMessage("MLPL: new session started (variables cleared).");
      } catch (e) {
        void vscode.window.showErrorMessage(`MLPL: ${e instanceof Error ? e.message : String(e)}`);
      }
    }),
    vscode.commands.registerCommand("mlpl.selectDevice", async (device?: string) => {
      // MLX only when the runner has it (older runners do not say: offered).
      const mlx = device ? undefined : await runner.hasMlx().catch(() => undefined);
      const offered = DEVICES.filter((d) => d.label !== "mlx" || mlx !== false);
      const pick = device ?? (await vscode.window.showQuickPick(
        offered.map((d) => ({ ...d, picked: d.label === runner.device })),
        { title: `Device for new runs (now: ${runner.device})`, placeHolder: "cpu, cuda, cuda:N or mlx" },
      ))?.label;
      if (pick) {
        await runner.setDevice(pick);
      }
    }),
    vscode.commands.registerCommand("mlpl.showEstimate", async (args?: { uri?: string; range?: { start: { line: number; character: number } } }) => {
      // The lens on a `train` block: its full estimate is the server's hover on the keyword.
      if (!args?.uri || !args.range) {
        return;
      }
      const editor = await vscode.window.showTextDocument(vscode.Uri.parse(args.uri));
      const at = new vscode.Position(args.range.start.line, args.range.start.character);
      editor.selection = new vscode.Selection(at, at);
      await vscode.commands.executeCommand("editor.action.showHover");
    }),
    vscode.commands.registerCommand("mlpl.showPanel", () => panel.show(false)),
    vscode.commands.registerCommand("mlpl.showRunnerLog", () => log.show(true)),
    vscode.commands.registerCommand("mlpl.refreshVariables", () => runner.refreshVariables()),
    vscode.commands.registerCommand("mlpl.restartRunner", () => runner.restartRunner()),
    vscode.commands.registerCommand("mlpl.restartLanguageServer", () => lsp.restart()),
    vscode.commands.registerCommand("mlpl.setRunnerToken", async (given?: string) => {
      const token = typeof given === "string" && given
        ? given
        : await vscode.window.showInputBox({ title: "Bearer token for mlpl.runner.url", password: true, ignoreFocusOut: true });
      if (token) {
        await runner.setToken(token);
      }
    }),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("mlpl.runner")) {
        // The next run connects with the new settings.
        runner.disconnect();
      }
    }),
  );

  const languageServerReady = lsp.start();
  languageServerReady.catch(() => undefined);
  // A window reload finds the session this workspace was using.
  void runner.reattachIfSaved();

  return {
    languageServerReady,
    model: () => runner.model,
    waitForRun: (id) => runner.waitForRun(id),
    panelSummary: () => panel.summary,
    variablesViewItems: () => variables.items(),
    runnerState: () => runner.state,
    session: () => runner.session,
    refreshVariables: () => runner.refreshVariables(),
  };
}

/** Called by VS Code on shutdown; the subscriptions stop the server and the runner. */
export function deactivate(): void {}
