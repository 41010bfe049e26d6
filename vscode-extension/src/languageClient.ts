/**
 * The language client: starts `mlpl-lsp` over stdio for `mlpl` documents and keeps
 * its settings in sync (the server's own setting names, see core/serverSettings).
 */

import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  TransportKind,
} from "vscode-languageclient/node";
import { resolveBinary } from "./binaries";
import { STEP_MEASURED_METHOD, type StepMeasuredParams } from "./core/measured";
import { serverSettings } from "./core/serverSettings";
import { languageServerSettings, settings } from "./settings";

/** Owns the running language client; restarts it when `mlpl.server.path` changes. */
export class LanguageClientHost implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private readonly channel: vscode.OutputChannel;

  constructor(private readonly ctx: vscode.ExtensionContext) {
    this.channel = vscode.window.createOutputChannel("MLPL Language Server");
    this.disposables.push(
      this.channel,
      vscode.workspace.onDidChangeConfiguration((e) => {
        if (e.affectsConfiguration("mlpl.server.path")) {
          void this.restart();
        } else if (e.affectsConfiguration("mlpl") && this.client?.isRunning()) {
          void this.client.sendNotification(DidChangeConfigurationNotification.type, {
            settings: serverSettings(languageServerSettings()),
          });
        }
      }),
    );
  }

  /** Starts the server (once); resolves when it has answered `initialize`. */
  start(): Promise<void> {
    if (!this.starting) {
      this.starting = this.doStart().catch((e) => {
        this.starting = undefined;
        const msg = `MLPL: the language server could not start: ${e instanceof Error ? e.message : String(e)}. Set "mlpl.server.path" to an mlpl-lsp binary.`;
        this.channel.appendLine(msg);
        void vscode.window.showErrorMessage(msg);
        throw e;
      });
    }
    return this.starting;
  }

  private async doStart(): Promise<void> {
    const command = resolveBinary(this.ctx.extensionPath, "mlpl-lsp", settings().serverPath);
    const serverOptions: ServerOptions = { command, args: [], transport: TransportKind.stdio };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "mlpl" },
        { scheme: "untitled", language: "mlpl" },
      ],
      initializationOptions: serverSettings(languageServerSettings()),
      outputChannel: this.channel,
      diagnosticCollectionName: "mlpl",
    };
    this.client = new LanguageClient("mlpl", "MLPL Language Server", serverOptions, clientOptions);
    this.channel.appendLine(`starting ${command}`);
    await this.client.start();
  }

  /**
   * Forwards what the runner measured of a `train` loop (`mlpl/stepMeasured`,
   * docs/language-server.md); dropped while the server is not running.
   */
  notifyMeasured(params: StepMeasuredParams): void {
    if (this.client?.isRunning()) {
      void this.client.sendNotification(STEP_MEASURED_METHOD, params).catch(() => undefined);
    }
  }

  /** Stops and starts the server again. */
  async restart(): Promise<void> {
    const old = this.client;
    this.client = undefined;
    this.starting = undefined;
    if (old) {
      await old.stop().catch(() => undefined);
    }
    await this.start().catch(() => undefined);
  }

  dispose(): void {
    for (const d of this.disposables) {
      d.dispose();
    }
    void this.client?.stop().catch(() => undefined);
  }
}
