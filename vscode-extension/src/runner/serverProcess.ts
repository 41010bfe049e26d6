/**
 * Starting a local runner: `mlpl serve --bind 127.0.0.1:0 --token-file F
 * --exit-with-stdin` with a
 * fresh random token, waiting for the `listening on` line to learn the port. The
 * token goes through a file readable only by the user, never the command line.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { readServeLine, type ServeAnnouncement } from "../core/serveOutput";

/** A runner process this extension started. */
export interface LocalRunner {
  url: string;
  token: string;
  process: ChildProcess;
  /** Stops the process. */
  dispose(): void;
}

/** How to start a local runner. */
export interface LocalRunnerOptions {
  /** Path of the `mlpl` binary. */
  binary: string;
  /** `--state-dir`: where sessions are saved (for reattaching after a reload). */
  stateDir?: string;
  /** `--data-dir`: the only directory file builtins may use. */
  dataDir?: string;
  /** Receives every line the process prints (both streams). */
  log: (line: string) => void;
  /** Called when the process exits. */
  onExit: (code: number | null, signal: string | null) => void;
  /** How long to wait for the `listening on` line (ms). */
  startTimeoutMs?: number;
}

/** Starts `mlpl serve` on a free loopback port and resolves when it listens. */
export function startLocalRunner(opts: LocalRunnerOptions): Promise<LocalRunner> {
  const token = randomBytes(24).toString("hex");
  const dir = mkdtempSync(join(tmpdir(), "mlpl-runner-"));
  const tokenFile = join(dir, "token");
  writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  // --exit-with-stdin: the runner stops when this process goes away, even when
  // it is killed (its end of the stdin pipe closes).
  const args = ["serve", "--bind", "127.0.0.1:0", "--token-file", tokenFile, "--exit-with-stdin"];
  if (opts.stateDir) {
    args.push("--state-dir", opts.stateDir);
  }
  if (opts.dataDir) {
    args.push("--data-dir", opts.dataDir);
  }
  opts.log(`starting: ${opts.binary} ${args.join(" ")}`);
  return new Promise((resolve, reject) => {
    let child: ChildProcess;
    try {
      child = spawn(opts.binary, args, { stdio: ["pipe", "pipe", "pipe"] });
    } catch (e) {
      rmSync(dir, { recursive: true, force: true });
      reject(new Error(`cannot start the runner ${opts.binary}: ${String(e)}`));
      return;
    }
    const seen: ServeAnnouncement = {};
    let settled = false;
    const timer = setTimeout(() => {
      if (!settled) {
        settled = true;
        child.kill();
        reject(new Error(`the runner did not report its address within ${opts.startTimeoutMs ?? 15000} ms`));
      }
    }, opts.startTimeoutMs ?? 15000);
    const lines = (stream: NodeJS.ReadableStream | null, onLine: (l: string) => void) => {
      let buf = "";
      stream?.setEncoding("utf8");
      stream?.on("data", (chunk: string) => {
        buf += chunk;
        let i: number;
        while ((i = buf.indexOf("\n")) >= 0) {
          onLine(buf.slice(0, i).replace(/\r$/, ""));
          buf = buf.slice(i + 1);
        }
      });
    };
    lines(child.stdout, (l) => {
      opts.log(l);
      readServeLine(l, seen);
      if (seen.url && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve({
          url: seen.url,
          token,
          process: child,
          dispose: () => {
            child.kill();
          },
        });
      }
    });
    lines(child.stderr, opts.log);
    child.on("error", (e) => {
      rmSync(dir, { recursive: true, force: true });
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(new Error(`cannot start the runner ${opts.binary}: ${e.message} (set mlpl.runner.path)`));
      }
    });
    child.on("exit", (code, signal) => {
      rmSync(dir, { recursive: true, force: true });
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(new Error(`the runner exited (code ${code}, signal ${signal}) before listening; see the MLPL output channel`));
      }
      opts.onExit(code, signal);
    });
  });
}
