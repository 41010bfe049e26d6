/**
 * The connection to the runner and the notebook-like session of this workspace:
 * starts or connects to `mlpl serve`, creates or reattaches to the session
 * (its id is kept in the workspace state, so a window reload finds it again),
 * follows its events into a `SessionModel`, runs cells one after another,
 * cancels, restarts, and fetches variables after each run.
 */

import * as vscode from "vscode";
import { resolveBinary } from "./binaries";
import type { TelemetryEvent } from "./core/events";
import { abandonRun, activeRun, applyEvent, emptySession, findRun, type RunRecord, type SessionModel } from "./core/runModel";
import { RunnerClient, RunnerError, type RunCell, type Variable } from "./runner/client";
import { startLocalRunner, type LocalRunner } from "./runner/serverProcess";
import { settings } from "./settings";

/** What the status bar shows. */
export type RunnerState = "stopped" | "starting" | "idle" | "running" | "error";

/** One piece of code to run and where it sits. */
export interface CellJob {
  code: string;
  cell: RunCell;
  /** Record the run's timeline ("Run Cell with Trace"). */
  timeline?: boolean;
}

const SESSION_KEY = "mlpl.runner.session";
const DEVICE_KEY = "mlpl.runner.device";
const TOKEN_SECRET = "mlpl.runner.token";

interface SavedSession {
  /** The runner the session lives on (`local` for one this extension starts). */
  runner: string;
  id: string;
}

/** Owns the runner connection and the session. */
export class RunnerController implements vscode.Disposable {
  private client: RunnerClient | undefined;
  private local: LocalRunner | undefined;
  private connecting: Promise<RunnerClient> | undefined;
  private opening: Promise<{ client: RunnerClient; session: string }> | undefined;
  private sessionId: string | undefined;
  private follower: { stop(): void } | undefined;
  private queueAbort = false;
  private readonly finished = new Map<string, (r: RunRecord) => void>();
  private stateValue: RunnerState = "stopped";
  private vars: Variable[] = [];

  /** The session's runs as seen through its events. */
  model: SessionModel = emptySession();

  private readonly stateEmitter = new vscode.EventEmitter<RunnerState>();
  private readonly eventEmitter = new vscode.EventEmitter<{ event: TelemetryEvent; run: RunRecord }>();
  private readonly varsEmitter = new vscode.EventEmitter<Variable[]>();
  private readonly resetEmitter = new vscode.EventEmitter<void>();
  /** Fires when the runner state changes. */
  readonly onDidChangeState = this.stateEmitter.event;
  /** Fires for every telemetry event applied to the model. */
  readonly onEvent = this.eventEmitter.event;
  /** Fires when the variables were fetched. */
  readonly onDidChangeVariables = this.varsEmitter.event;
  /** Fires when the model was replaced (new session, reattach). */
  readonly onDidReset = this.resetEmitter.event;

  constructor(
    private readonly ctx: vscode.ExtensionContext,
    private readonly log: vscode.OutputChannel,
  ) {}

  /** The runner's state. */
  get state(): RunnerState {
    return this.stateValue;
  }

  /** The device new runs use. */
  get device(): string {
    return this.ctx.workspaceState.get<string>(DEVICE_KEY) ?? settings().device;
  }

  /** The variables of the last finished run. */
  get variables(): readonly Variable[] {
    return this.vars;
  }

  /** The current session id, if any. */
  get session(): string | undefined {
    return this.sessionId;
  }

  private setState(s: RunnerState): void {
    if (s !== this.stateValue) {
      this.stateValue = s;
      this.stateEmitter.fire(s);
    }
  }

  /** Sets the device for the next runs. */
  /** Whether the runner can run MLX (`GET /v1/health`); undefined when it does not say. */
  async hasMlx(): Promise<boolean | undefined> {
    return (await (await this.connect()).health()).mlx;
  }

  async setDevice(device: string): Promise<void> {
    await this.ctx.workspaceState.update(DEVICE_KEY, device);
    this.stateEmitter.fire(this.stateValue);
  }

  /** Stores the token for `mlpl.runner.url` in the secret storage. */
  async setToken(token: string): Promise<void> {
    await this.ctx.secrets.store(TOKEN_SECRET, token);
    this.disconnect();
  }

  private runnerKey(): string {
    return settings().runnerUrl.trim() || "local";
  }

  private async connect(): Promise<RunnerClient> {
    if (this.client) {
      return this.client;
    }
    if (!this.connecting) {
      this.connecting = this.doConnect().finally(() => {
        this.connecting = undefined;
      });
    }
    return this.connecting;
  }

  private async doConnect(): Promise<RunnerClient> {
    this.setState("starting");
    const s = settings();
    try {
      let client: RunnerClient;
      if (s.runnerUrl.trim()) {
        let token = await this.ctx.secrets.get(TOKEN_SECRET);
        if (!token) {
          token = await vscode.window.showInputBox({
            title: `Bearer token of the runner at ${s.runnerUrl}`,
            prompt: "Stored in VS Code's secret storage (command: MLPL: Set Runner Token)",
            password: true,
            ignoreFocusOut: true,
          });
          if (!token) {
            throw new Error(`no token for the runner at ${s.runnerUrl}: run "MLPL: Set Runner Token"`);
          }
          await this.ctx.secrets.store(TOKEN_SECRET, token);
        }
        client = new RunnerClient(s.runnerUrl.trim(), token);
        await client.health();
        this.log.appendLine(`connected to the runner at ${s.runnerUrl}`);
      } else {
        const binary = resolveBinary(this.ctx.extensionPath, "mlpl", s.runnerPath);
        const stateDir = s.persistSessions && this.ctx.storageUri
          ? vscode.Uri.joinPath(this.ctx.storageUri, "runner-state").fsPath
          : undefined;
        if (stateDir) {
          await vscode.workspace.fs.createDirectory(vscode.Uri.file(stateDir));
        }
        const dataDir = s.runnerDataDir.trim() || vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
        this.local = await startLocalRunner({
          binary,
          stateDir,
          dataDir,
          log: (l) => this.log.appendLine(l),
          onExit: (code, signal) => {
            this.log.appendLine(`runner exited (code ${code}, signal ${signal})`);
            if (this.local) {
              this.local = undefined;
              this.disconnect();
            }
          },
        });
        client = new RunnerClient(this.local.url, this.local.token);
      }
      this.client = client;
      this.setState("idle");
      return client;
    } catch (e) {
      this.setState("error");
      throw e;
    }
  }

  /** Drops the connection (stopping a local runner); the next run connects again. */
  disconnect(): void {
    this.follower?.stop();
    this.follower = undefined;
    this.client = undefined;
    this.sessionId = undefined;
    const local = this.local;
    this.local = undefined;
    local?.dispose();
    // Runs still waited for will not report `run_finished` any more.
    for (const [id, resolve] of this.finished) {
      resolve(abandonRun(this.model, id, Date.now()));
    }
    this.finished.clear();
    this.setState("stopped");
  }

  /**
   * Connects and makes sure there is a session: the one saved for this workspace
   * if the runner still has it (reattach), else a new one.
   */
  ensureSession(): Promise<{ client: RunnerClient; session: string }> {
    // One attempt at a time: two quick Run commands must not create two sessions.
    if (!this.opening) {
      this.opening = this.openSession().finally(() => {
        this.opening = undefined;
      });
    }
    return this.opening;
  }

  private async openSession(): Promise<{ client: RunnerClient; session: string }> {
    const client = await this.connect();
    if (this.sessionId) {
      return { client, session: this.sessionId };
    }
    const saved = this.ctx.workspaceState.get<SavedSession>(SESSION_KEY);
    let session: string | undefined;
    if (saved && saved.runner === this.runnerKey()) {
      const known = await client.listSessions().catch(() => []);
      if (known.some((k) => k.id === saved.id)) {
        session = saved.id;
        this.log.appendLine(`reattached to session ${session}`);
      }
    }
    if (!session) {
      session = await client.createSession();
      this.log.appendLine(`created session ${session}`);
      await this.ctx.workspaceState.update(SESSION_KEY, { runner: this.runnerKey(), id: session } satisfies SavedSession);
    }
    this.sessionId = session;
    this.model = emptySession();
    this.model.session = session;
    this.resetEmitter.fire();
    this.follow(client, session);
    void this.refreshVariables();
    return { client, session };
  }

  /** Reattaches at startup when this workspace has a saved session (no new session otherwise). */
  async reattachIfSaved(): Promise<boolean> {
    const saved = this.ctx.workspaceState.get<SavedSession>(SESSION_KEY);
    if (!saved || saved.runner !== this.runnerKey()) {
      return false;
    }
    try {
      await this.ensureSession();
      return this.sessionId === saved.id;
    } catch (e) {
      this.log.appendLine(`reattach failed: ${String(e)}`);
      return false;
    }
  }

  private follow(client: RunnerClient, session: string): void {
    this.follower?.stop();
    this.follower = client.follow(
      session,
      0,
      (event) => this.onRunnerEvent(event),
      (reason) => {
        this.log.appendLine(`event stream ended: ${reason}`);
        if (this.sessionId === session) {
          this.sessionId = undefined;
        }
      },
    );
  }

  private onRunnerEvent(event: TelemetryEvent): void {
    const run = applyEvent(this.model, event);
    if (!run) {
      return;
    }
    if (event.type === "run_started") {
      this.setState("running");
    }
    if (event.type === "run_finished") {
      this.setState("idle");
      const d = event.diagnostic;
      this.log.appendLine(
        `run ${run.id} ${event.status} in ${event.elapsed_ms.toFixed(1)} ms${d ? `: ${d.code} ${d.message} (line ${d.line ?? "?"})` : ""}`,
      );
      void this.refreshVariables();
    }
    if (event.type === "warning") {
      this.log.appendLine(`warning ${event.diagnostic.code}: ${event.diagnostic.message} (line ${event.diagnostic.line ?? "?"})`);
    }
    this.eventEmitter.fire({ event, run });
    if (event.type === "run_finished") {
      const resolve = this.finished.get(run.id);
      if (resolve) {
        this.finished.delete(run.id);
        resolve(run);
      }
    }
  }

  /** Fetches the variables of the session. */
  async refreshVariables(): Promise<void> {
    if (!this.client || !this.sessionId) {
      return;
    }
    try {
      const v = await this.client.variables(this.sessionId);
      this.vars = v.variables;
      this.varsEmitter.fire(this.vars);
    } catch (e) {
      this.log.appendLine(`variables: ${String(e)}`);
    }
  }

  /**
   * Runs the jobs in order, each as its own run, and stops at the first that does
   * not end `ok` (or at a cancel). Resolves with the finished runs.
   */
  async runCells(jobs: CellJob[]): Promise<RunRecord[]> {
    const { client, session } = await this.ensureSession();
    this.queueAbort = false;
    const done: RunRecord[] = [];
    for (const job of jobs) {
      if (this.queueAbort) {
        break;
      }
      let runId: string;
      try {
        runId = await client.startRun(session, job.code, job.cell, this.device, job.timeline === true);
      } catch (e) {
        if (e instanceof RunnerError && e.code === "busy") {
          throw new Error("a run is in progress in this session: wait for it or cancel it (MLPL: Cancel Run)");
        }
        throw e;
      }
      const run = await this.waitForRun(runId);
      done.push(run);
      if (run.status !== "ok") {
        break;
      }
    }
    return done;
  }

  /** Resolves when the run has finished (immediately if it already has). */
  waitForRun(runId: string): Promise<RunRecord> {
    const known = findRun(this.model, runId);
    if (known && known.status !== "running") {
      return Promise.resolve(known);
    }
    return new Promise((resolve) => this.finished.set(runId, resolve));
  }

  /** Cancels the run in progress and the cells queued after it. */
  async cancel(): Promise<boolean> {
    this.queueAbort = true;
    const run = activeRun(this.model);
    if (!run || !this.client) {
      return false;
    }
    return this.client.cancelRun(run.id);
  }

  /** Deletes the session and starts a fresh one (variables and run history are cleared). */
  async restartSession(): Promise<void> {
    this.queueAbort = true;
    const client = await this.connect();
    const old = this.sessionId;
    this.follower?.stop();
    this.follower = undefined;
    this.sessionId = undefined;
    if (old) {
      await client.deleteSession(old).catch((e) => this.log.appendLine(`delete session ${old}: ${String(e)}`));
    }
    await this.ctx.workspaceState.update(SESSION_KEY, undefined);
    this.vars = [];
    this.varsEmitter.fire(this.vars);
    await this.ensureSession();
  }

  /** Restarts the runner itself (a local one is stopped and started again). */
  async restartRunner(): Promise<void> {
    this.disconnect();
    await this.ensureSession();
  }

  dispose(): void {
    this.disconnect();
    this.stateEmitter.dispose();
    this.eventEmitter.dispose();
    this.varsEmitter.dispose();
    this.resetEmitter.dispose();
  }
}
