/**
 * HTTP client of the runner (`mlpl serve`, docs/runner-protocol.md): sessions,
 * runs, cancel, variables, save/restore, and the session's event stream over
 * server-sent events with resume (`Last-Event-ID`) after a dropped connection.
 * Uses the platform `fetch`; knows nothing of VS Code.
 */

import { SseParser } from "../core/sse";
import { parseEventData, type TelemetryEvent } from "../core/events";

/** An error answer of the runner (`{"error": {"code", "message"}}`) or a transport failure. */
export class RunnerError extends Error {
  constructor(
    message: string,
    /** HTTP status, 0 when the runner could not be reached. */
    readonly status: number,
    /** The runner's error code (`busy`, `not_found`, …) or `unreachable`. */
    readonly code: string,
  ) {
    super(message);
    this.name = "RunnerError";
  }
}

/** One variable of a session (`GET /v1/sessions/{id}/variables`). */
export interface Variable {
  name: string;
  kind: string;
  shape: number[] | null;
  named_shape: string | null;
  dtype: string | null;
  device: string | null;
  param: boolean;
  frozen: boolean;
  /** A name the runtime generated for a model's parameter (`__linear_W_0`);
   * absent from runners older than this field. */
  generated?: boolean;
  parameters: string[] | null;
  preview: string;
}

/** A session as listed by `GET /v1/sessions`. */
export interface SessionInfo {
  id: string;
  busy: boolean;
  run: string | null;
  runs: number;
  last_seq: number;
}

/** Where the code of a run sits (sent with the run so diagnostics land on document lines). */
export interface RunCell {
  uri: string;
  index: number;
  start_line: number;
}

/** Talks to one runner. */
export class RunnerClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  private async request<T>(method: string, path: string, body?: unknown): Promise<T> {
    let res: Response;
    try {
      res = await fetch(new URL(path, this.baseUrl), {
        method,
        headers: {
          Authorization: `Bearer ${this.token}`,
          ...(body !== undefined ? { "Content-Type": "application/json" } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
      });
    } catch (e) {
      throw new RunnerError(`cannot reach the runner at ${this.baseUrl}: ${String(e)}`, 0, "unreachable");
    }
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      throw new RunnerError(`the runner answered ${res.status} with non-JSON text: ${text.slice(0, 200)}`, res.status, "bad_response");
    }
    if (!res.ok) {
      const err = (json as { error?: { code?: string; message?: string } }).error;
      throw new RunnerError(
        `runner: ${err?.message ?? `HTTP ${res.status}`} (${method} ${path})`,
        res.status,
        err?.code ?? `http_${res.status}`,
      );
    }
    return json as T;
  }

  /** `GET /v1/health` (no token needed). */
  health(): Promise<{ status: string; version: string; schema: number; sessions: number; mlx?: boolean }> {
    return this.request("GET", "/v1/health");
  }

  /** Creates a session and returns its id. */
  async createSession(): Promise<string> {
    return (await this.request<{ id: string }>("POST", "/v1/sessions", {})).id;
  }

  /** Lists the sessions, oldest first. */
  async listSessions(): Promise<SessionInfo[]> {
    return (await this.request<{ sessions: SessionInfo[] }>("GET", "/v1/sessions")).sessions;
  }

  /** Deletes a session (cancels its run, removes its saved state). */
  async deleteSession(id: string): Promise<void> {
    await this.request("DELETE", `/v1/sessions/${encodeURIComponent(id)}`);
  }

  /** Starts a run; returns its id. Throws `RunnerError` with code `busy` while another runs. */
  async startRun(session: string, code: string, cell?: RunCell, device?: string, timeline = false): Promise<string> {
    const body: Record<string, unknown> = { code };
    if (cell) {
      body.cell = cell;
    }
    if (device) {
      body.device = device;
    }
    if (timeline) {
      // The runner sends the run's timeline as an `artifact` event of kind `timeline`.
      body.timeline = true;
    }
    return (await this.request<{ run: string }>("POST", `/v1/sessions/${encodeURIComponent(session)}/runs`, body)).run;
  }

  /** The status of a run: `running`, `ok`, `error` or `cancelled`. */
  async runStatus(run: string): Promise<string> {
    return (await this.request<{ status: string }>("GET", `/v1/runs/${encodeURIComponent(run)}`)).status;
  }

  /** Asks a run to stop; returns whether it was still in progress. */
  async cancelRun(run: string): Promise<boolean> {
    return (await this.request<{ cancelling: boolean }>("POST", `/v1/runs/${encodeURIComponent(run)}/cancel`)).cancelling;
  }

  /** The session's variables as of its last finished run. */
  async variables(session: string): Promise<{ busy: boolean; variables: Variable[] }> {
    return this.request("GET", `/v1/sessions/${encodeURIComponent(session)}/variables`);
  }

  /** Saves the session now (needs a runner with `--state-dir`). */
  async save(session: string): Promise<void> {
    await this.request("POST", `/v1/sessions/${encodeURIComponent(session)}/save`);
  }

  /** Replaces the session's workspace with its saved state. */
  async restore(session: string): Promise<{ variables: number; not_restored: string[] }> {
    return this.request("POST", `/v1/sessions/${encodeURIComponent(session)}/restore`);
  }

  /**
   * Follows the session's events from after `afterSeq` until `stop()` is called,
   * reconnecting with `Last-Event-ID` when the connection drops (the runner replays
   * what was missed, once). `onEnd` is called when the stream ends for good: the
   * session is gone (404) or the runner stays unreachable.
   */
  follow(
    session: string,
    afterSeq: number,
    onEvent: (e: TelemetryEvent) => void,
    onEnd: (reason: string) => void,
  ): { stop(): void } {
    const abort = new AbortController();
    let lastSeq = afterSeq;
    let stopped = false;
    const loop = async () => {
      let failures = 0;
      while (!stopped) {
        try {
          const res = await fetch(new URL(`/v1/sessions/${encodeURIComponent(session)}/events?after=${lastSeq}`, this.baseUrl), {
            headers: { Authorization: `Bearer ${this.token}`, Accept: "text/event-stream" },
            signal: abort.signal,
          });
          if (res.status === 404 || res.status === 401) {
            onEnd(res.status === 404 ? `session ${session} no longer exists` : "the runner refused the token");
            return;
          }
          if (!res.ok || !res.body) {
            throw new Error(`HTTP ${res.status}`);
          }
          failures = 0;
          const parser = new SseParser();
          const decoder = new TextDecoder();
          const reader = res.body.getReader();
          for (;;) {
            const { value, done } = await reader.read();
            if (done) {
              break;
            }
            for (const msg of parser.push(decoder.decode(value, { stream: true }))) {
              const e = parseEventData(msg.data);
              if (e && e.seq > lastSeq) {
                lastSeq = e.seq;
                onEvent(e);
              }
            }
          }
        } catch (e) {
          if (stopped) {
            return;
          }
          failures++;
          if (failures > 20) {
            onEnd(`lost the runner's event stream: ${String(e)}`);
            return;
          }
        }
        if (!stopped) {
          await new Promise((r) => setTimeout(r, Math.min(5000, 200 * 2 ** Math.min(failures, 5))));
        }
      }
    };
    void loop();
    return {
      stop() {
        stopped = true;
        abort.abort();
      },
    };
  }
}
