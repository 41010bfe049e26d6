// Connected mode: the page runs its cells on a running `mlpl serve` (URL and
// token typed by the user; the server must name this page's origin with
// `--allow-origin`), through the VS Code extension's own runner client
// (vscode-extension/src/runner/client.ts: sessions, runs, cancel, save, the
// SSE event stream with resume). Telemetry events become the same callbacks
// the local Web Worker runner calls.
import { RunnerClient } from '../../../vscode-extension/src/runner/client.ts';

const SESSION_KEY = (url) => `mlpl-playground-session:${url}`;

/** A one-line rendering of a run diagnostic (telemetry's JSON form). */
export function renderDiagnostic(d) {
  const where = d.line != null ? `\n --> line ${d.line}:${d.column}` : '';
  const rest = [d.label, ...(d.notes || []).map((n) => `note: ${n}`), d.help && `help: ${d.help}`].filter(Boolean);
  return `${d.severity}[${d.code}]: ${d.message}${where}${rest.length ? '\n' + rest.join('\n') : ''}`;
}

/**
 * Connects to the runner at `url` with `token`: reuses this page's session
 * there when the server still holds it (so a reload, or a server restarted
 * with `--state-dir`, comes back to the same workspace), else creates one.
 */
export async function connect(url, token, onEnd) {
  const client = new RunnerClient(url, token);
  const health = await client.health();
  const sessions = await client.listSessions();
  const known = localStorage.getItem(SESSION_KEY(url));
  const existing = sessions.find((s) => s.id === known);
  const session = existing ? existing.id : await client.createSession();
  localStorage.setItem(SESSION_KEY(url), session);
  const handlers = new Map(); // run id -> callbacks
  const early = new Map(); // run id -> events that came before startRun answered
  const results = new Map(); // run id -> what the run produced so far

  function deliver(e) {
    const h = handlers.get(e.run);
    if (!h) {
      if (!early.has(e.run)) early.set(e.run, []);
      early.get(e.run).push(e);
      return;
    }
    const r = results.get(e.run);
    switch (e.type) {
      case 'step':
        h.step({ loop: e.loop, step: e.step, total: e.total, loss: e.loss ?? NaN, ms: e.step_ms });
        break;
      case 'value':
        r.value = e.text;
        break;
      case 'artifact':
        if (e.kind === 'svg' && e.content) r.svgs.push(e.content);
        break;
      case 'warning':
        r.warnings.push({ rendered: renderDiagnostic(e.diagnostic) });
        break;
      case 'run_finished': {
        handlers.delete(e.run);
        results.delete(e.run);
        const isSvg = r.value != null && r.value.trimStart().startsWith('<svg');
        h.done({
          type: 'done',
          ms: e.elapsed_ms,
          result: {
            ok: e.status === 'ok',
            cancelled: e.status === 'cancelled',
            value: isSvg ? r.value : r.value ?? (r.svgs[0] || null),
            svg: isSvg || (r.value == null && r.svgs.length > 0),
            warnings: r.warnings,
            error: e.diagnostic ? { code: e.diagnostic.code, rendered: renderDiagnostic(e.diagnostic) } : null,
            experiments: [],
            saved: e.saved,
          },
        });
        break;
      }
      default:
        break;
    }
  }

  const lastSeq = existing ? existing.last_seq : 0;
  const stream = client.follow(session, lastSeq, deliver, (reason) => onEnd && onEnd(reason));

  return {
    url,
    session,
    reused: Boolean(existing),
    version: health.version,
    /** Runs a cell there; `h` gets `step`, `done`; returns the run id. */
    async run(cell, index, h) {
      const id = await client.startRun(session, cell.source, { uri: 'playground.mlpl', index, start_line: cell.startLine });
      handlers.set(id, h);
      results.set(id, { value: null, svgs: [], warnings: [] });
      for (const e of early.get(id) || []) deliver(e);
      early.delete(id);
      return id;
    },
    cancel: (run) => client.cancelRun(run),
    save: () => client.save(session),
    variables: () => client.variables(session),
    close() {
      stream.stop();
    },
  };
}
