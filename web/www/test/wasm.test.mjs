// The wasm module in Node: the checker reports named-shape errors as `mlpl
// check` does, and `run` prints exactly what the native `mlpl run` prints for
// the examples (their snapshots, which the native example tests check).
// Needs dist/mlpl.wasm (scripts/wasm-build.sh).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { instantiate } from '../src/mlpl.js';

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, '../../..');
const steps = [];
const mlpl = await instantiate(readFileSync(join(here, '../dist/mlpl.wasm')), {
  onStep: (loop, step, total, loss) => steps.push({ loop, step, total, loss }),
});

/** The stdout that `mlpl run examples/NAME.mlpl` prints, from its snapshot. */
function nativeStdout(name) {
  const snap = readFileSync(join(repo, `runtime/runner/tests/runner/snapshots/runner__examples__${name}.snap`), 'utf8');
  const m = snap.match(/--- stdout\n([\s\S]*?)--- stderr\n([\s\S]*)$/);
  assert.ok(m, `snapshot of ${name}`);
  return { stdout: m[1], stderr: m[2].trim() };
}

test('check reports a shape error naming both shapes, with related locations', () => {
  const src = 'x : [batch, feat] = zeros([3, 4])\ny : [time, feat] = zeros([5, 4])\nz = x + y\n';
  const { diagnostics } = mlpl.check(src);
  const errors = diagnostics.filter((d) => d.severity === 'error');
  assert.equal(errors.length, 1, JSON.stringify(diagnostics));
  const [d] = errors;
  assert.equal(d.code, 'E0201');
  assert.equal(src.slice(d.from, d.to), 'y');
  assert.equal(d.label, 'right operand: [time=5, feat=4]');
  // Related locations: the left operand, and where each operand got its names.
  // (The annotation spans end before its `]`, in `mlpl check` too.)
  const related = d.labels.map((l) => [l.line, src.slice(l.from, l.to).slice(0, 5), l.message]);
  assert.deepEqual(related, [
    [3, 'x', 'left operand: [batch=3, feat=4]'],
    [1, 'x : [', 'the left operand got its axis names here'],
    [2, 'y : [', 'the right operand got its axis names here'],
  ]);
  assert.deepEqual(mlpl.check('x = zeros([3, 4])\nx + 1\n').diagnostics, []);
});

test('hover is the language server\'s: the named shape, and a train loop\'s estimate', () => {
  const src = 'x : [batch, feat] = zeros([3, 4])\nx\n';
  const h = mlpl.hover(src, src.length - 2);
  assert.match(h.markdown, /x: \[batch=3, feat=4\]/);
  assert.deepEqual([h.from, h.to], [src.length - 2, src.length - 1]);
  const mlp = readFileSync(join(repo, 'examples/tiny_mlp.mlpl'), 'utf8');
  const t = mlpl.hover(mlp, mlp.indexOf('train 300') + 1);
  assert.match(t.markdown, /train 300/);
  assert.match(t.markdown, /CPU/);
  assert.match(t.markdown, /parameters/);
});

test('completion offers the registry\'s builtins with docs, keywords and the document\'s names', () => {
  const src = 'learning_rate = 0.1\nfn twice(x) { x * 2 }\nle';
  const names = (text) => mlpl.complete(text, text.length).items;
  const lr = names(src).find((i) => i.label === 'learning_rate');
  assert.equal(lr.detail, 'scalar 0.1');
  assert.equal(lr.from, src.length - 2);
  const ma = names('ma').find((i) => i.label === 'matmul');
  assert.equal(ma.type, 'function');
  assert.match(ma.detail, /^matmul\(/);
  assert.ok(ma.info.length > 20, ma.info);
  assert.ok(ma.snippet && ma.apply.startsWith('matmul(${1:'), ma.apply);
  const t = names('fn twice(x) { x * 2 }\ntw').map((i) => i.label);
  assert.ok(t.includes('twice'), t.join());
  assert.ok(names('tr').some((i) => i.label === 'train' && i.type === 'keyword'));
  const dev = mlpl.complete('device("', 8).items.map((i) => i.label);
  assert.ok(dev.includes('cpu') && dev.includes('cuda'), dev.join());
});

test('experiment runs come back with each cell and two compare as compare() does', () => {
  mlpl.reset();
  const src = readFileSync(join(repo, 'examples/experiments.mlpl'), 'utf8');
  const r = mlpl.run(src);
  assert.equal(r.error, null);
  assert.deepEqual(r.experiments.map((e) => e.name), ['baseline', 'shifted']);
  assert.ok('accuracy_metric' in r.experiments[0].metrics);
  const { report } = mlpl.compare(r.experiments[0], r.experiments[1]);
  assert.equal(report, r.value);
});

test('files and llm_call answer that they are not available', () => {
  const r = mlpl.run('load("data.csv")\n');
  assert.equal(r.ok, false);
  assert.match(r.error.rendered, /not available in the browser/);
  const l = mlpl.run('llm_call("http://127.0.0.1:11434", "hi", "llama3.2")\n');
  assert.equal(l.ok, false, JSON.stringify(l));
  assert.equal(l.error.code, 'E0408');
  assert.match(l.error.rendered, /this build of MLPL has no HTTP client/);
});

// tiny_lm takes minutes in wasm today (docs/playground.md), so CI runs it only
// when asked: MLPL_PLAYGROUND_TINY_LM=1 node --test web/www/test/wasm.test.mjs
const tinyLm = process.env.MLPL_PLAYGROUND_TINY_LM === '1' ? test : test.skip;

tinyLm('tiny_lm prints exactly what the native mlpl run prints', (t) => {
  const want = nativeStdout('tiny_lm');
  assert.equal(want.stdout, '5.7037826 5.5920854 0.07700125\n');
  steps.length = 0;
  const started = performance.now();
  const r = mlpl.run(readFileSync(join(repo, 'examples/tiny_lm.mlpl'), 'utf8'));
  t.diagnostic(`tiny_lm in Node: ${((performance.now() - started) / 1000).toFixed(1)} s in all`);
  assert.equal(r.error, null);
  assert.equal(r.value + '\n', want.stdout);
  assert.equal(steps.length, 200);
  assert.equal(r.losses.length, 200);
  assert.ok(r.losses[199] < r.losses[0] / 10, 'the loss falls');
});

for (const name of ['arrays', 'named_axes', 'tiny_mlp', 'logistic_regression', 'moons_classifier', 'tokenizers']) {
  test(`${name} prints what the native mlpl run prints`, () => {
    const want = nativeStdout(name);
    const r = mlpl.run(readFileSync(join(repo, `examples/${name}.mlpl`), 'utf8'));
    assert.equal(r.error, null, r.error && r.error.rendered);
    assert.equal((r.value ?? '') + (r.value == null ? '' : '\n'), want.stdout);
  });
}

test('cells share one workspace', () => {
  mlpl.reset();
  assert.equal(mlpl.runCell('# %% a\na = 6\n', 0).ok, true);
  assert.equal(mlpl.runCell('# %% b\na * 7\n', 2).value, '42');
  const bad = mlpl.runCell('# %% c\nb + 1\n', 4);
  assert.equal(bad.error.code, 'E0101');
  assert.equal(bad.error.line, 6);
});
