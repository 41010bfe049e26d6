// The MLPL playground page (docs/playground.md): a CodeMirror 6 editor checked
// as you type by the same checker as `mlpl check`, with the language server's
// hovers (shapes, feasibility estimates) and completion (in this page's own
// copy of the wasm module); `# %%` cells run in a Web Worker (worker.js) or,
// connected, on a `mlpl serve` (connected.js), with Cancel; each cell's value,
// warnings, errors, charts and live loss curve (lossChart.js) shown under it,
// and the experiment runs listed and compared (experiments.js).
import { EditorView, basicSetup } from 'codemirror';
import { EditorState } from '@codemirror/state';
import { hoverTooltip } from '@codemirror/view';
import { linter, lintGutter } from '@codemirror/lint';
import { StreamLanguage } from '@codemirror/language';
import { snippet } from '@codemirror/autocomplete';
import { instantiate } from './mlpl.js';
import { renderMarkdown } from './markdown.js';
import { liveLossChart } from './lossChart.js';
import { experimentsView } from './experiments.js';
import { connect } from './connected.js';

const TRAIN_LIMIT = 5000; // web/src/lib.rs TRAIN_LIMIT

const KEYWORDS = new Set(['repeat', 'train', 'for', 'in', 'experiment', 'device', 'fn']); // runtime/syntax/src/token.rs KEYWORDS
const mlplLanguage = StreamLanguage.define({
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^#.*/)) return 'comment';
    if (stream.match(/^"(?:[^"\\]|\\.)*"?/)) return 'string';
    if (stream.match(/^\d+(\.\d*)?([eE][-+]?\d+)?/)) return 'number';
    if (stream.match(/^[A-Za-z_][A-Za-z0-9_]*/)) {
      const w = stream.current();
      if (KEYWORDS.has(w)) return 'keyword';
      return stream.peek() === '(' ? 'function' : 'variableName';
    }
    stream.next();
    return null;
  },
});

const $ = (sel) => document.querySelector(sel);
const status = (text) => {
  $('#status').textContent = text;
};

// Cells: a `# %%` line starts one; text before the first marker is cell 0
// when it holds code (runtime/syntax/src/cells.rs has the exact rules).
function cellsOf(text) {
  const lines = text.split('\n');
  const markers = [];
  lines.forEach((l, i) => {
    if (l.startsWith('# %%')) markers.push(i);
  });
  const cells = [];
  const slice = (a, b) => lines.slice(a, b).join('\n');
  if (markers.length === 0) return [{ title: '', startLine: 0, source: text }];
  const pre = slice(0, markers[0]);
  if (pre.split('\n').some((l) => l.trim() && !l.trim().startsWith('#'))) {
    cells.push({ title: '', startLine: 0, source: pre });
  }
  markers.forEach((m, k) => {
    const end = k + 1 < markers.length ? markers[k + 1] : lines.length;
    cells.push({ title: lines[m].slice(4).trim(), startLine: m, source: slice(m, end) });
  });
  return cells;
}

async function main() {
  const t0 = performance.now();
  const bytes = await (await fetch('dist/mlpl.wasm')).arrayBuffer();
  const module = await WebAssembly.compile(bytes);
  const mlpl = await instantiate(module);
  const loadMs = performance.now() - t0;
  document.body.dataset.wasmBytes = String(bytes.byteLength);
  document.body.dataset.loadMs = loadMs.toFixed(1);
  const examples = await (await fetch('dist/examples.json')).json();

  const mlplLinter = linter(
    (view) =>
      mlpl.check(view.state.doc.toString()).diagnostics.flatMap((d) => {
        const len = view.state.doc.length;
        const clamp = (n) => Math.max(0, Math.min(len, n ?? 0));
        const related = (d.labels || []).map((l) => `line ${l.line}: ${l.message}`);
        const message = [d.code + ': ' + d.message, d.label, ...related, ...(d.notes || []), d.help && 'help: ' + d.help]
          .filter(Boolean)
          .join('\n');
        const main = { from: clamp(d.from), to: clamp(d.to), severity: d.severity === 'error' ? 'error' : 'warning', message };
        // The related locations (where each operand got its names) get their own marks.
        const marks = (d.labels || []).map((l) => ({
          from: clamp(l.from),
          to: clamp(l.to),
          severity: 'info',
          message: `${d.code}: ${l.message}`,
        }));
        return [main, ...marks];
      }),
    { delay: 300 },
  );
  const shapeHover = hoverTooltip((view, pos) => {
    const h = mlpl.hover(view.state.doc.toString(), pos);
    if (!h) return null;
    return {
      pos: h.from,
      end: h.to,
      above: true,
      create() {
        const dom = renderMarkdown(h.markdown);
        dom.classList.add('mlpl-hover');
        return { dom };
      },
    };
  });

  // Completion: the language server's list for the cursor (builtins with their
  // signatures and docs, keywords, the document's names and functions).
  const boost = (sort) => (sort?.startsWith('0') ? 2 : sort?.startsWith('1') ? 1 : 0);
  const mlplCompletions = (context) => {
    const word = context.matchBefore(/[A-Za-z_][A-Za-z0-9_]*/);
    const afterQuote = /"[^"\n]*$/.test(context.state.sliceDoc(Math.max(0, context.pos - 40), context.pos));
    if (!context.explicit && !word && !afterQuote) return null;
    const { items } = mlpl.complete(context.state.doc.toString(), context.pos);
    if (!items.length) return null;
    return {
      from: items[0].from,
      validFor: /^[A-Za-z0-9_:]*$/,
      options: items.map((i) => ({
        label: i.label,
        type: i.type,
        detail: i.detail ?? undefined,
        boost: boost(i.sort),
        info: i.info ? () => renderMarkdown(i.info) : undefined,
        // LSP snippets' `$0` is CodeMirror's `${0}`.
        apply: i.snippet ? snippet(i.apply.replace(/\$(\d+)/g, '${$1}')) : i.apply,
      })),
    };
  };

  const view = new EditorView({
    parent: $('#editor'),
    state: EditorState.create({
      doc: examples['tiny_mlp.mlpl'] ?? '',
      extensions: [
        basicSetup,
        mlplLanguage,
        mlplLinter,
        lintGutter(),
        shapeHover,
        EditorState.languageData.of(() => [{ autocomplete: mlplCompletions }]),
        EditorView.updateListener.of((u) => {
          if (u.docChanged) renderCells();
        }),
      ],
    }),
  });
  window.mlplEditor = view;

  const select = $('#examples');
  for (const name of Object.keys(examples).sort()) {
    const o = document.createElement('option');
    o.value = o.textContent = name;
    select.append(o);
  }
  select.value = 'tiny_mlp.mlpl';
  select.onchange = () => {
    view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: examples[select.value] } });
    resetWorker('a new example');
  };

  // Where cells run: the local Web Worker (terminated to cancel, so a run's
  // workspace goes with it), or a connected `mlpl serve` session.
  const local = localRunner();
  let server = null; // the connection, when connected
  const experiments = experimentsView($('#experiments'), (a, b) => mlpl.compare(a, b));

  function resetWorker(why) {
    local.reset(why);
  }

  const outputs = new Map(); // cell title+index -> last output element
  function renderCells() {
    const list = $('#cells');
    const cells = cellsOf(view.state.doc.toString());
    const keep = new Map();
    list.replaceChildren(
      ...cells.map((cell, i) => {
        const key = `${i}:${cell.title}`;
        const box = document.createElement('section');
        box.className = 'cell';
        box.dataset.index = String(i);
        const head = document.createElement('div');
        head.className = 'cell-head';
        const title = document.createElement('span');
        title.textContent = `[${i}] ${cell.title || '(untitled)'} · line ${cell.startLine + 1}`;
        const run = document.createElement('button');
        run.textContent = 'Run';
        run.className = 'run';
        const cancel = document.createElement('button');
        cancel.textContent = 'Cancel';
        cancel.className = 'cancel';
        cancel.disabled = true;
        head.append(run, cancel, title);
        const out = outputs.get(key) ?? document.createElement('div');
        out.className = 'output';
        keep.set(key, out);
        run.onclick = () => runCell(i, out, run, cancel);
        box.append(head, out);
        return box;
      }),
    );
    outputs.clear();
    for (const [k, v] of keep) outputs.set(k, v);
  }

  function runCell(index, out, runButton, cancelButton) {
    const cell = cellsOf(view.state.doc.toString())[index];
    if (!cell) return;
    out.replaceChildren();
    out.dataset.state = 'running';
    out.dataset.where = server ? 'server' : 'browser';
    const progress = document.createElement('div');
    progress.className = 'progress';
    progress.textContent = server ? `running on ${server.url}…` : 'running…';
    const chartHost = document.createElement('div');
    chartHost.className = 'live-loss';
    out.append(progress);
    const chart = liveLossChart(chartHost);
    runButton.disabled = true;
    cancelButton.disabled = false;
    const finish = () => {
      runButton.disabled = false;
      cancelButton.disabled = true;
    };
    const stepMs = [];
    const handlers = {
      step({ loop, step, total, loss, ms }) {
        stepMs.push(ms);
        if (chart.steps === 0) out.append(chartHost);
        chart.step(loop, step, loss);
        progress.textContent = `step ${step}/${total} · loss ${Number(loss).toPrecision(6)} · ${ms.toFixed(1)} ms/step`;
      },
      done(msg) {
        finish();
        chart.finish();
        if (msg.type === 'failed') {
          out.dataset.state = 'error';
          progress.textContent = msg.message;
          return;
        }
        const r = msg.result;
        out.dataset.state = r.ok ? 'ok' : r.cancelled ? 'cancelled' : 'error';
        out.dataset.ms = msg.ms.toFixed(1);
        if (stepMs.length) out.dataset.medianStepMs = median(stepMs).toFixed(2);
        const steps = chart.steps;
        const where = server ? ` on ${server.url}` + (r.saved ? ' (session saved)' : '') : '';
        progress.textContent = `${r.ok ? 'done' : r.cancelled ? 'cancelled' : 'failed'} in ${(msg.ms / 1000).toFixed(2)} s${where}` + (steps ? ` · ${steps} steps, ${(msg.ms / steps).toFixed(1)} ms/step` : '');
        for (const w of r.warnings) out.append(pre(w.rendered, 'warning'));
        if (r.error) out.append(pre(r.error.rendered, 'error'));
        if (r.value != null) {
          if (r.svg) {
            const img = document.createElement('img');
            img.className = 'chart';
            img.alt = 'chart';
            img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(r.value);
            out.append(img);
          } else {
            out.append(pre(r.value, 'value'));
          }
        }
        experiments.add(r.experiments);
      },
      cancelled(why) {
        finish();
        chart.finish();
        out.dataset.state = 'cancelled';
        progress.textContent = `${why}: the run was stopped and its workspace discarded (run the cells again from the top)`;
      },
    };
    if (server) {
      const conn = server;
      const started = conn.run(cell, index, handlers);
      cancelButton.onclick = async () => {
        cancelButton.disabled = true;
        progress.textContent = 'cancelling…';
        await conn.cancel(await started);
      };
      started.catch((e) => handlers.done({ type: 'failed', message: String(e.message || e) }));
    } else {
      cancelButton.onclick = () => resetWorker('cancelled');
      local.run(cell, handlers);
    }
  }

  // Connected mode.
  $('#connect').onsubmit = async (ev) => {
    ev.preventDefault();
    const state = $('#connection');
    if (server) {
      server.close();
      server = null;
      document.body.dataset.connected = 'false';
      state.textContent = 'running in this browser';
      $('#connect button[type=submit]').textContent = 'Connect';
      $('#save').disabled = true;
      return;
    }
    const url = $('#server-url').value.trim();
    const token = $('#server-token').value.trim();
    state.textContent = `connecting to ${url}…`;
    try {
      server = await connect(url, token, (reason) => {
        state.textContent = `disconnected: ${reason}`;
      });
      document.body.dataset.connected = 'true';
      document.body.dataset.session = server.session;
      state.textContent = `connected to ${url} (mlpl ${server.version}), session ${server.session}${server.reused ? ' (resumed)' : ''}: cells run there`;
      $('#connect button[type=submit]').textContent = 'Disconnect';
      $('#save').disabled = false;
    } catch (e) {
      server = null;
      state.textContent = `cannot connect: ${e.message || e} (is \`mlpl serve --allow-origin ${location.origin}\` running there, and the token right?)`;
    }
  };
  $('#save').onclick = async () => {
    try {
      await server.save();
      $('#connection').textContent = `session ${server.session} saved on ${server.url}`;
    } catch (e) {
      $('#connection').textContent = `save failed: ${e.message || e}`;
    }
  };

  $('#run-all').onclick = async () => {
    for (const box of document.querySelectorAll('.cell')) {
      const out = box.querySelector('.output');
      box.querySelector('.run').click();
      await new Promise((resolve) => {
        const obs = new MutationObserver(() => {
          if (out.dataset.state !== 'running') {
            obs.disconnect();
            resolve();
          }
        });
        obs.observe(out, { attributes: true });
      });
      if (out.dataset.state !== 'ok') break;
    }
  };

  $('#limit').textContent = `Training in the browser is limited to ${TRAIN_LIMIT} iterations per train loop, single-threaded on the CPU; files, CUDA/MLX and llm_call are not available (use mlpl run, or connect to a mlpl serve, for those).`;
  renderCells();
  status(`ready: ${(bytes.byteLength / 1024 / 1024).toFixed(2)} MiB of wasm loaded in ${loadMs.toFixed(0)} ms`);
  document.body.dataset.ready = 'true';
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

function pre(text, cls) {
  const p = document.createElement('pre');
  p.className = cls;
  p.textContent = text;
  return p;
}

/** The Web Worker runner: one worker holding one workspace, terminated to cancel. */
function localRunner() {
  let worker = null;
  let nextId = 1;
  const running = new Map(); // id -> handlers
  function start() {
    worker = new Worker('dist/worker.js', { type: 'module' });
    worker.onmessage = ({ data }) => {
      if (data.type === 'ready') {
        document.body.dataset.workerLoadMs = data.loadMs.toFixed(1);
        return;
      }
      const h = running.get(data.id);
      if (!h) return;
      if (data.type === 'step') h.step(data);
      else {
        running.delete(data.id);
        h.done(data);
      }
    };
  }
  return {
    run(cell, handlers) {
      if (!worker) start();
      const id = nextId++;
      running.set(id, handlers);
      worker.postMessage({ id, source: cell.source, firstLine: cell.startLine });
    },
    reset(why) {
      if (worker) worker.terminate();
      worker = null;
      for (const h of running.values()) h.cancelled(why);
      running.clear();
    },
  };
}

main().catch((e) => {
  status(`failed to start: ${e.message || e}`);
  document.body.dataset.ready = 'failed';
  console.error(e);
});
