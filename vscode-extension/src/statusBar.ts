/** The status-bar item: the device and the runner's state; a click picks the device. */

import * as vscode from "vscode";
import { activeRun, loopProgress } from "./core/runModel";
import type { RunnerController, RunnerState } from "./runnerController";

const ICONS: Record<RunnerState, string> = {
  stopped: "$(debug-disconnect)",
  starting: "$(loading~spin)",
  idle: "$(pass)",
  running: "$(sync~spin)",
  error: "$(error)",
};

/** Keeps the status-bar item up to date. */
export class RunnerStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("mlpl.runner", vscode.StatusBarAlignment.Left, 50);
  private readonly subs: vscode.Disposable[];

  constructor(private readonly runner: RunnerController) {
    this.item.name = "MLPL Runner";
    this.item.command = "mlpl.selectDevice";
    this.subs = [runner.onDidChangeState(() => this.update()), runner.onEvent(({ event }) => event.type === "step" && this.update())];
    this.update();
    this.item.show();
  }

  /** Redraws the item. */
  update(): void {
    const state = this.runner.state;
    let detail: string = state;
    const run = activeRun(this.runner.model);
    if (state === "running" && run && run.loops.length) {
      const p = loopProgress(run.loops[run.loops.length - 1]);
      detail = `step ${p.step}/${p.total}`;
    }
    this.item.text = `${ICONS[state]} MLPL ${this.runner.device} · ${detail}`;
    this.item.tooltip = `MLPL runner: ${state}${this.runner.session ? ` (session ${this.runner.session})` : ""}\nDevice for new runs: ${this.runner.device} (click to change)`;
  }

  dispose(): void {
    this.item.dispose();
    for (const s of this.subs) {
      s.dispose();
    }
  }
}
