// The MLPL playground page (docs/playground.md): a CodeMirror 6 editor checked
// as you type by the same checker as `mlpl check` (in this page's own copy of
// the wasm module), `# %%` cells run in a Web Worker (worker.js) with Cancel,
// and each cell's value, warnings, errors and charts shown under it.
import { EditorView, basicSetup } from 'codemirror';
import { EditorState } from '@codemirror/state';
import { hoverTooltip } from '@codemirror/view';
import { linter, lintGutter } from '@codemirror/lint';
import { StreamLanguage } from '@codemirror/language';
import { instantiate } from './mlpl.js';

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
        const dom = document.createElement('div');
        dom.className = 'mlpl-hover';
        dom.textContent = h.text;
        return { dom };
      },
    };
  });

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

  // The runner worker; terminated to cancel, so a run's workspace goes with it.
  let worker = null;
  let nextId = 1;
  const running = new Map(); // id -> handlers
  function startWorker() {
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
  function resetWorker(why) {
    if (worker) worker.terminate();
    worker = null;
    for (const h of running.values()) h.cancelled(why);
    running.clear();
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
        cancel.onclick = () => resetWorker('cancelled');
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
    if (!worker) startWorker();
    const id = nextId++;
    out.replaceChildren();
    out.dataset.state = 'running';
    const progress = document.createElement('div');
    progress.className = 'progress';
    progress.textContent = 'running…';
    const curve = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    curve.setAttribute('class', 'live-loss');
    curve.setAttribute('viewBox', '0 0 300 80');
    curve.setAttribute('preserveAspectRatio', 'none');
    const line = document.createElementNS('http://www.w3.org/2000/svg', 'polyline');
    curve.append(line);
    out.append(progress);
    const losses = [];
    runButton.disabled = true;
    cancelButton.disabled = false;
    const finish = () => {
      runButton.disabled = false;
      cancelButton.disabled = true;
    };
    running.set(id, {
      step({ step, total, loss, ms }) {
        losses.push(loss);
        if (losses.length === 1) out.append(curve);
        progress.textContent = `step ${step}/${total} · loss ${loss.toPrecision(6)} · ${ms.toFixed(1)} ms/step`;
        if (losses.length % 5 === 0 || step === total) drawCurve(line, losses);
      },
      done(msg) {
        finish();
        if (losses.length) drawCurve(line, losses);
        if (msg.type === 'failed') {
          out.dataset.state = 'error';
          progress.textContent = msg.message;
          return;
        }
        const r = msg.result;
        out.dataset.state = r.ok ? 'ok' : 'error';
        out.dataset.ms = msg.ms.toFixed(1);
        progress.textContent = `${r.ok ? 'done' : 'failed'} in ${(msg.ms / 1000).toFixed(2)} s` + (losses.length ? ` · ${losses.length} steps, ${(msg.ms / losses.length).toFixed(1)} ms/step` : '');
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
      },
      cancelled(why) {
        finish();
        out.dataset.state = 'cancelled';
        progress.textContent = `${why}: the run was stopped and its workspace discarded (run the cells again from the top)`;
      },
    });
    worker.postMessage({ id, source: cell.source, firstLine: cell.startLine });
  }

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

  $('#limit').textContent = `Training in the browser is limited to ${TRAIN_LIMIT} iterations per train loop, single-threaded on the CPU; files, CUDA/MLX and llm_call are not available (use mlpl run for those).`;
  renderCells();
  status(`ready: ${(bytes.byteLength / 1024 / 1024).toFixed(2)} MiB of wasm loaded in ${loadMs.toFixed(0)} ms`);
  document.body.dataset.ready = 'true';
}

function pre(text, cls) {
  const p = document.createElement('pre');
  p.className = cls;
  p.textContent = text;
  return p;
}

function drawCurve(line, losses) {
  const lo = Math.min(...losses);
  const hi = Math.max(...losses);
  const n = Math.max(1, losses.length - 1);
  const pts = losses.map((l, i) => `${((i / n) * 300).toFixed(1)},${(78 - ((l - lo) / (hi - lo || 1)) * 76).toFixed(1)}`);
  line.setAttribute('points', pts.join(' '));
}

main().catch((e) => {
  status(`failed to start: ${e.message || e}`);
  document.body.dataset.ready = 'failed';
  console.error(e);
});
