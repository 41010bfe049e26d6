/**
 * The telemetry panel (a webview): it receives the session's model once and then
 * every event, and draws the run with uPlot (bundled in dist/webview.js). The
 * page is locked by a Content Security Policy: only the extension's own script
 * (with a nonce) and styles, images from the extension or `data:` (SVG artifacts
 * are shown as images, so their scripts never run), no network.
 */

import { randomBytes } from "node:crypto";
import * as vscode from "vscode";
import { revealSelection, type RevealRequest } from "./core/timeline";
import type { RunnerController } from "./runnerController";
import { settings } from "./settings";

/** What the webview reports after drawing (used by tests and the log). */
export interface PanelSummary {
  runs: number;
  run: string | null;
  status: string | null;
  /** Per loop; `measured` is the runner's measurement as the panel words it. */
  loops: { loop: number; points: number; steps: number[]; losses: (number | null)[]; measured: string | null }[];
  stepEvents: number;
  /** SVG artifacts shown as images. */
  images: number;
  /** Timeline bars drawn ("Run Cell with Trace"), by kind. */
  timeline: { statements: number; loops: number; steps: number; kernels: number } | null;
}

/** Messages from the webview. */
type FromWebview =
  | { type: "ready" }
  | { type: "cancel" }
  | { type: "rendered"; summary: PanelSummary }
  | { type: "setLogScale"; value: boolean }
  | RevealRequest;

/** Owns the panel (at most one). */
export class TelemetryPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private ready = false;
  private lastSummary: PanelSummary | undefined;
  private readonly subs: vscode.Disposable[];

  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly runner: RunnerController,
  ) {
    this.subs = [
      runner.onEvent(({ event }) => {
        if (this.panel && this.ready) {
          void this.panel.webview.postMessage({ type: "event", event });
        }
      }),
      runner.onDidReset(() => this.sendModel()),
      vscode.workspace.onDidChangeConfiguration((e) => e.affectsConfiguration("mlpl.panel") && this.sendModel()),
    ];
  }

  /** The last summary the webview posted after drawing. */
  get summary(): PanelSummary | undefined {
    return this.lastSummary;
  }

  /** Whether the panel is open. */
  get isOpen(): boolean {
    return this.panel !== undefined;
  }

  /** Opens the panel (or reveals it) without taking the focus from the editor. */
  show(preserveFocus = true): void {
    if (this.panel) {
      this.panel.reveal(undefined, preserveFocus);
      return;
    }
    const dist = vscode.Uri.joinPath(this.ctx.extensionUri, "dist");
    this.panel = vscode.window.createWebviewPanel(
      "mlpl.telemetry",
      "MLPL Training",
      { viewColumn: vscode.ViewColumn.Beside, preserveFocus },
      { enableScripts: true, retainContextWhenHidden: true, localResourceRoots: [dist] },
    );
    this.panel.iconPath = vscode.Uri.joinPath(this.ctx.extensionUri, "images", "icon.png");
    this.ready = false;
    this.panel.webview.html = this.html(this.panel.webview, dist);
    this.panel.webview.onDidReceiveMessage((m: FromWebview) => this.onMessage(m));
    this.panel.onDidDispose(() => {
      this.panel = undefined;
      this.ready = false;
    });
  }

  private onMessage(m: FromWebview): void {
    switch (m.type) {
      case "ready":
        this.ready = true;
        this.sendModel();
        break;
      case "cancel":
        void vscode.commands.executeCommand("mlpl.cancelRun");
        break;
      case "rendered":
        this.lastSummary = m.summary;
        break;
      case "setLogScale":
        void vscode.workspace.getConfiguration("mlpl").update("panel.logScale", m.value, vscode.ConfigurationTarget.Global);
        break;
      case "reveal":
        void this.reveal(m.uri, m.line, m.endLine);
        break;
    }
  }

  /** Shows a timeline statement's lines (1-based) in its document. */
  private async reveal(uri: string, line: number, endLine: number): Promise<void> {
    try {
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.parse(uri));
      const s = revealSelection(line, endLine, doc.lineCount, (l) => doc.lineAt(l).text.length);
      const range = new vscode.Range(s.startLine, 0, s.endLine, s.endCharacter);
      const editor = await vscode.window.showTextDocument(doc, { selection: range, viewColumn: vscode.ViewColumn.One, preserveFocus: false });
      editor.revealRange(range, vscode.TextEditorRevealType.InCenterIfOutsideViewport);
    } catch {
      // The document is gone: nothing to show.
    }
  }

  private sendModel(): void {
    if (!this.panel || !this.ready) {
      return;
    }
    const s = settings();
    void this.panel.webview.postMessage({
      type: "reset",
      model: this.runner.model,
      options: { smoothing: Math.min(0.999, Math.max(0, s.smoothing)), maxPoints: Math.max(10, s.maxPoints), logScale: s.logScale },
    });
  }

  private html(webview: vscode.Webview, dist: vscode.Uri): string {
    const nonce = randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(dist, "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(dist, "webview.css"));
    const csp = [
      "default-src 'none'",
      `script-src 'nonce-${nonce}'`,
      `style-src ${webview.cspSource}`,
      `img-src ${webview.cspSource} data:`,
      `font-src ${webview.cspSource}`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style}">
<title>MLPL Training</title>
</head>
<body>
<div id="app"><p class="muted">Waiting for a run… (Run Cell on a <code>train</code> block)</p></div>
<script nonce="${nonce}" src="${script}"></script>
</body>
</html>`;
  }

  dispose(): void {
    this.panel?.dispose();
    for (const s of this.subs) {
      s.dispose();
    }
  }
}
