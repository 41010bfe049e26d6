// The playground's runner: one Web Worker holding one MLPL session (a
// workspace shared by the cells run in it). The page terminates it to cancel a
// run and starts a fresh one (with an empty workspace) for the next.
//
// In:  { id, source, firstLine }      run a cell
// Out: { type: 'ready', loadMs }      the module is instantiated
//      { type: 'step', id, loop, step, total, loss, ms }
//      { type: 'done', id, result, ms }
//      { type: 'failed', id, message }
import { instantiate } from './mlpl.js';

let current = null;
const t0 = performance.now();
const ready = fetch(new URL('mlpl.wasm', self.location.href))
  .then((r) => r.arrayBuffer())
  .then((bytes) =>
    instantiate(bytes, {
      onStep: (loop, step, total, loss, ms) => self.postMessage({ type: 'step', id: current, loop, step, total, loss, ms }),
    }),
  )
  .then((mlpl) => {
    self.postMessage({ type: 'ready', loadMs: performance.now() - t0 });
    return mlpl;
  });

self.onmessage = async ({ data }) => {
  const mlpl = await ready;
  current = data.id;
  const started = performance.now();
  try {
    const result = mlpl.runCell(data.source, data.firstLine);
    self.postMessage({ type: 'done', id: data.id, result, ms: performance.now() - started });
  } catch (e) {
    self.postMessage({ type: 'failed', id: data.id, message: String(e.message || e) });
  }
};
