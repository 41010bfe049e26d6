// The playground in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core; every request outside 127.0.0.1 is refused). It serves
// web/www/ from a local static server, opens the page and checks what a user
// sees: a shape-error squiggle and its message naming both shapes, hovers
// with a shape and with a `train` loop's feasibility estimate, completion
// from the registry, a training cell whose uPlot loss curve falls and whose
// value equals the native `mlpl run` output, experiments compared, a chart, a
// long run cancelled, and connected mode: a real `mlpl serve --allow-origin`
// (target/debug/mlpl, or $MLPL_BIN) running cells, a cancel and a save. It
// prints the wasm size, the first-load time and the browser's time per
// training step; MLPL_PLAYGROUND_EXAMPLE=tiny_lm trains the tiny LM instead
// and also times the native `mlpl run` of it, for the ratio.
//
// Exit: 0 pass, 1 fail, 77 skipped (no Chromium or no built page).
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, extname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const repo = join(root, '../..');
const browserPath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(browserPath)) {
  console.error(`SKIP: playground browser test: no Chromium at ${browserPath}`);
  process.exit(77);
}
if (!existsSync(join(root, 'dist/mlpl.wasm')) || !existsSync(join(root, 'dist/main.js'))) {
  console.error('SKIP: playground browser test: web/www/dist is not built (bash scripts/wasm-build.sh)');
  process.exit(77);
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.wasm': 'application/wasm', '.json': 'application/json' };
const server = createServer((req, res) => {
  const path = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname)).replace(/^(\.\.[/\\])+/, '');
  const file = join(root, path === '/' ? 'index.html' : path);
  if (!file.startsWith(root) || !existsSync(file) || statSync(file).isDirectory()) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': types[extname(file)] || 'application/octet-stream' });
  res.end(readFileSync(file));
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const url = `http://127.0.0.1:${server.address().port}/`;
const pageOrigin = new URL(url).origin;

// The runner for connected mode: the debug build the Rust tests build.
const mlplBin = process.env.MLPL_BIN || join(repo, 'target/debug/mlpl');

/** Starts `mlpl serve` allowing this page's origin; resolves with its URL. */
async function startServe(stateDir, token) {
  const child = spawn(mlplBin, ['serve', '--bind', '127.0.0.1:0', '--token', token, '--allow-origin', pageOrigin, '--state-dir', stateDir, '--exit-with-stdin'], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout });
  const first = await new Promise((resolve, reject) => {
    lines.once('line', resolve);
    child.once('exit', (code) => reject(new Error(`mlpl serve exited with ${code}`)));
  });
  const m = first.match(/^mlpl serve listening on (http:\/\/\S+)/);
  assert.ok(m, first);
  return { child, url: m[1] };
}

// The training example run cell by cell: tiny_mlp (300 steps, seconds) unless
// MLPL_PLAYGROUND_EXAMPLE=tiny_lm (200 steps, minutes: the measurement in
// docs/playground.md). Both have 4 cells: data, model, train, result.
const example = process.env.MLPL_PLAYGROUND_EXAMPLE || 'tiny_mlp';
const stepsOf = { tiny_mlp: 300, tiny_lm: 200 };
assert.ok(stepsOf[example], `MLPL_PLAYGROUND_EXAMPLE must be one of ${Object.keys(stepsOf)}`);
const steps = stepsOf[example];
const snapshot = readFileSync(join(repo, `runtime/runner/tests/runner/snapshots/runner__examples__${example}.snap`), 'utf8');
const nativeValue = snapshot.match(/--- stdout\n(.*)\n/)[1];

const browser = await chromium.launch({
  executablePath: browserPath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
let failed = false;
try {
  const page = await browser.newPage();
  await page.route('**/*', (route) => (new URL(route.request().url()).hostname === '127.0.0.1' ? route.continue() : route.abort()));
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 60000 });
  const info = await page.evaluate(() => ({ ...document.body.dataset }));
  const limit = await page.textContent('#limit');
  assert.match(limit, /limited to 5000 iterations/);

  const setText = (text) =>
    page.evaluate((t) => {
      const v = window.mlplEditor;
      v.dispatch({ changes: { from: 0, to: v.state.doc.length, insert: t } });
    }, text);

  // A shape error: a squiggle, and its message names both shapes.
  await setText('x : [batch, feat] = zeros([3, 4])\ny : [time, feat] = zeros([5, 4])\nz = x + y\n');
  const squiggle = await page.waitForSelector('.cm-lintRange-error', { timeout: 20000 });
  assert.equal(await squiggle.textContent(), 'y');
  await squiggle.hover();
  const tip = await page.waitForSelector('.cm-tooltip-lint', { timeout: 10000 });
  const message = await tip.textContent();
  assert.match(message, /right operand: \[time=5, feat=4\]/);
  assert.match(message, /left operand: \[batch=3, feat=4\]/);
  console.log(`squiggle message: ${message.replace(/\s+/g, ' ').slice(0, 160)}`);
  await page.mouse.move(0, 0);

  // Hovers: the language server's, with the named shape.
  const hoverAt = async (line, x) => {
    await page.mouse.move(0, 0);
    await page.waitForFunction(() => !document.querySelector('.mlpl-hover'));
    await page.locator('.cm-line').nth(line).hover({ position: { x, y: 5 } });
    return (await page.waitForSelector('.mlpl-hover', { timeout: 10000 })).textContent();
  };
  await setText('w : [batch, feat] = zeros([2, 8])\nw\n');
  await page.waitForFunction(() => !document.querySelector('.cm-lintRange-error'));
  assert.match(await hoverAt(1, 3), /w: \[batch=2, feat=8\]/);

  // Completion from the registry: builtins with signature and docs, the
  // document's names; accepting one inserts its snippet.
  await setText('learning_rate = 0.1\nfn twice(x) { x * 2 }\nma');
  const completeAtEnd = async (text) => {
    await page.click('.cm-content');
    await page.keyboard.press('Control+End');
    if (text) await page.keyboard.type(text);
    await page.keyboard.press('Control+Space');
    return page.waitForSelector('.cm-tooltip-autocomplete', { timeout: 10000 });
  };
  let list = await completeAtEnd('');
  assert.match(await list.textContent(), /matmul/);
  const option = page.locator('.cm-tooltip-autocomplete li', { hasText: /^matmul/ }).first();
  await option.click();
  const after = await page.evaluate(() => window.mlplEditor.state.doc.toString());
  assert.match(after, /\nmatmul\(\w+, \w+\)$/, after);
  await page.keyboard.press('Escape');
  await page.keyboard.press('Control+End');
  await page.keyboard.press('Enter');
  list = await completeAtEnd('ma');
  await page.waitForSelector('.cm-completionInfo', { timeout: 10000 });
  const doc = await page.textContent('.cm-completionInfo');
  assert.ok(doc.length > 20, doc);
  await page.keyboard.press('Escape');
  await page.keyboard.press('Enter');
  list = await completeAtEnd('tw');
  assert.match(await list.textContent(), /twice/);
  await page.keyboard.press('Escape');
  console.log(`completion: matmul with docs (${doc.replace(/\s+/g, ' ').slice(0, 60)}…), the document's twice`);

  // The example, cell by cell: the loss falls, the value is the native one.
  await page.selectOption('#examples', `${example}.mlpl`);
  await page.waitForSelector('.cell[data-index="3"]');
  const runAll = Date.now();
  await page.click('#run-all');
  await page.waitForSelector('.cell[data-index="3"] .output[data-state="ok"], .output[data-state="error"]', { timeout: 300000 });
  const wallMs = Date.now() - runAll;
  assert.equal(await page.locator('.output[data-state="error"]').count(), 0, await page.locator('#cells').innerText());
  assert.equal(await page.locator('.cell[data-index="3"] pre.value').textContent(), nativeValue);
  const train = page.locator('.cell[data-index="2"] .output');
  const trainMs = Number(await train.getAttribute('data-ms'));
  const medianStepMs = Number(await train.getAttribute('data-median-step-ms'));
  assert.match(await train.innerText(), new RegExp(`${steps} steps`));
  // The live loss curve: uPlot's canvas, every step drawn, the loss falling.
  const curve = train.locator('.live-loss');
  await curve.locator('.uplot canvas').first().waitFor({ timeout: 10000 });
  assert.equal(Number(await curve.getAttribute('data-points')), steps);
  const firstLoss = Number(await curve.getAttribute('data-first-loss'));
  const lastLoss = Number(await curve.getAttribute('data-last-loss'));
  assert.ok(lastLoss < firstLoss, `the loss falls: ${firstLoss} -> ${lastLoss}`);
  console.log(
    `playground: wasm ${info.wasmBytes} bytes; first load (fetch + compile + instantiate, page) ${info.loadMs} ms; ` +
      `${example} train cell ${trainMs.toFixed(0)} ms = ${(trainMs / steps).toFixed(1)} ms/step, median step ${medianStepMs} ms (run all ${wallMs} ms)`,
  );
  if (example === 'tiny_lm' && existsSync(mlplBin)) {
    // The native CPU on the same machine in the same run: the median of the
    // step times `mlpl run --events jsonl` reports (the binary's profile is
    // whatever MLPL_BIN names; target/debug/mlpl is the dev profile).
    const native = spawnSync(mlplBin, ['run', '--events', 'jsonl', join(repo, 'examples/tiny_lm.mlpl')], { encoding: 'utf8', maxBuffer: 1 << 26 });
    const ms = native.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l)).filter((e) => e.type === 'step').map((e) => e.step_ms);
    assert.ok(ms.length > 0, native.stderr);
    const nativeMedian = ms.sort((a, b) => a - b)[ms.length >> 1];
    console.log(`tiny_lm median step: browser ${medianStepMs} ms, native (${mlplBin}) ${nativeMedian.toFixed(2)} ms: ${(medianStepMs / nativeMedian).toFixed(1)}x`);
  }
  // A train loop's hover: the language server's feasibility estimate.
  const trainLine = (await page.evaluate(() => window.mlplEditor.state.doc.toString())).split('\n').findIndex((l) => l.startsWith('train '));
  const estimate = await hoverAt(trainLine, 8);
  assert.match(estimate, new RegExp(`Feasibility of train ${steps}`));
  assert.match(estimate, /CPU/);
  assert.match(estimate, /parameters/);
  await page.mouse.move(0, 0);
  console.log(`train hover: ${estimate.replace(/\s+/g, ' ').slice(0, 120)}`);

  // Experiments: the example's two runs listed with their metric, compared
  // with compare()'s report (the example's last value).
  await page.selectOption('#examples', 'experiments.mlpl');
  await page.waitForSelector('.cell[data-index="2"]');
  await page.click('#run-all');
  await page.waitForSelector('.cell[data-index="2"] .output[data-state="ok"]', { timeout: 60000 });
  const rows = page.locator('#experiments table.experiments tr');
  assert.equal(await rows.count(), 3);
  assert.match(await page.textContent('#experiments table.experiments'), /accuracy_metric/);
  await page.locator('#experiments input.pick').nth(0).check();
  await page.locator('#experiments input.pick').nth(1).check();
  const report = await page.textContent('#experiments pre.compare');
  assert.equal(report, await page.textContent('.cell[data-index="2"] pre.value'));
  assert.match(report, /^compare baseline vs shifted/);

  // A chart, and a long run cancelled.
  // (The long run's steps are 128×128 products: minutes in all, so it is
  // still running when its first step is reported.)
  await setText('# %% chart\nloss_curve([3, 2, 1.5, 1.2, 1])\n# %% long\nA = ones([128, 128])\ntrain 5000 {\n  loss_metric = sum(matmul(A, A + step))\n}\n');
  await page.waitForSelector('.cell[data-index="1"]');
  await page.click('.cell[data-index="0"] .run');
  const chart = await page.waitForSelector('.cell[data-index="0"] img.chart', { timeout: 20000 });
  assert.match(await chart.getAttribute('src'), /^data:image\/svg\+xml/);
  await page.click('.cell[data-index="1"] .run');
  await page.waitForFunction(() => /step \d+\/5000/.test(document.querySelector('.cell[data-index="1"] .progress')?.textContent || ''), null, { timeout: 20000 });
  assert.equal(await page.getAttribute('.cell[data-index="1"] .output', 'data-state'), 'running');
  await page.click('.cell[data-index="1"] .cancel');
  await page.waitForSelector('.cell[data-index="1"] .output[data-state="cancelled"]', { timeout: 10000 });
  // The page still answers: a new run starts in a fresh worker.
  await page.click('.cell[data-index="0"] .run');
  await page.waitForSelector('.cell[data-index="0"] img.chart', { timeout: 20000 });

  // Connected mode: a real `mlpl serve` allowing this page's origin runs the
  // cells (SSE telemetry), cancels one, keeps the session's workspace and
  // saves it to its state directory.
  let connected = `SKIPPED (no mlpl binary at ${mlplBin}; cargo build -p mlpl-runner)`;
  if (existsSync(mlplBin)) {
    const stateDir = mkdtempSync(join(tmpdir(), 'mlpl-playground-'));
    const token = 'playground-test-token';
    const serve = await startServe(stateDir, token);
    try {
      await page.fill('#server-url', serve.url);
      await page.fill('#server-token', token);
      await page.click('#connect button[type=submit]');
      await page.waitForSelector('body[data-connected="true"]', { timeout: 20000 });
      await setText('# %% a\na = 6\n# %% train\nW = param[2]\ntrain 20 {\n  momentum_sgd(sum((W - [1, 2]) * (W - [1, 2])), W, 0.1, 0.5)\n  loss_metric = sum((W - [1, 2]) * (W - [1, 2]))\n}\nloss_metric\n# %% use a\na * 7\n# %% long\nA = ones([128, 128])\ntrain 5000 {\n  loss_metric = sum(matmul(A, A + step))\n}\n');
      await page.waitForSelector('.cell[data-index="3"]');
      for (const i of [0, 1, 2]) {
        await page.click(`.cell[data-index="${i}"] .run`);
        await page.waitForSelector(`.cell[data-index="${i}"] .output:not([data-state="running"])`, { timeout: 60000 });
        assert.equal(await page.getAttribute(`.cell[data-index="${i}"] .output`, 'data-state'), 'ok', await page.locator(`.cell[data-index="${i}"]`).innerText());
        assert.equal(await page.getAttribute(`.cell[data-index="${i}"] .output`, 'data-where'), 'server');
      }
      assert.equal(await page.textContent('.cell[data-index="2"] pre.value'), '42');
      const served = page.locator('.cell[data-index="1"] .live-loss');
      // The server sends at most 20 step events a second, the last step always.
      assert.ok(Number(await served.getAttribute('data-points')) >= 2);
      assert.ok(Number(await served.getAttribute('data-last-loss')) < Number(await served.getAttribute('data-first-loss')));
      await page.click('.cell[data-index="3"] .run');
      await page.waitForFunction(() => /step \d+\/5000/.test(document.querySelector('.cell[data-index="3"] .progress')?.textContent || ''), null, { timeout: 60000 });
      await page.click('.cell[data-index="3"] .cancel');
      await page.waitForSelector('.cell[data-index="3"] .output[data-state="cancelled"]', { timeout: 30000 });
      assert.match(await page.textContent('.cell[data-index="3"] .output'), /E0409/);
      // The server's session kept its workspace through the cancel.
      await page.click('.cell[data-index="2"] .run');
      await page.waitForSelector('.cell[data-index="2"] .output[data-state="ok"]', { timeout: 30000 });
      assert.equal(await page.textContent('.cell[data-index="2"] pre.value'), '42');
      await page.click('#save');
      await page.waitForFunction(() => /saved on/.test(document.querySelector('#connection').textContent), null, { timeout: 20000 });
      const session = await page.getAttribute('body', 'data-session');
      assert.ok(existsSync(join(stateDir, session, 'session.json')), 'the session is saved in the state directory');
      await page.click('#connect button[type=submit]');
      await page.waitForSelector('body[data-connected="false"]');
      connected = `ran 3 cells on ${serve.url}, cancelled one, saved session ${session}`;
    } finally {
      serve.child.stdin.end();
      serve.child.kill();
      rmSync(stateDir, { recursive: true, force: true });
    }
  }
  console.log(`connected mode: ${connected}`);

  assert.deepEqual(errors, []);
  console.log('playground browser test: ok');
} catch (e) {
  failed = true;
  console.error('playground browser test FAILED:', e);
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
