/** The extension's `mlpl.*` settings, read in one place (documented in package.json). */

import * as vscode from "vscode";
import type { ClientSettings } from "./core/serverSettings";

/** Reads the current settings. */
export function settings() {
  const c = vscode.workspace.getConfiguration("mlpl");
  return {
    serverPath: c.get<string>("server.path", ""),
    runnerPath: c.get<string>("runner.path", ""),
    runnerUrl: c.get<string>("runner.url", ""),
    runnerDataDir: c.get<string>("runner.dataDir", ""),
    persistSessions: c.get<boolean>("runner.persistSessions", true),
    device: c.get<string>("device", "cpu"),
    openPanelOnRun: c.get<boolean>("panel.openOnRun", true),
    smoothing: c.get<number>("panel.smoothing", 0.6),
    maxPoints: c.get<number>("panel.maxPoints", 1000),
    logScale: c.get<boolean>("panel.logScale", false),
    inlineValues: c.get<boolean>("editor.inlineValues", true),
  };
}

/** The settings forwarded to the language server. */
export function languageServerSettings(): ClientSettings {
  const c = vscode.workspace.getConfiguration("mlpl");
  return {
    inlayHintsShapes: c.get<boolean>("inlayHints.shapes", true),
    cudaDevice: c.get<string>("estimates.cudaDevice", ""),
    mlxDevice: c.get<string>("estimates.mlxDevice", ""),
    calibrationFile: c.get<string>("estimates.calibrationFile", ""),
    docsUrl: c.get<string>("docsUrl", ""),
  };
}
