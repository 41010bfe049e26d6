// The playground in headless Chromium (Debian's /usr/bin/chromium driven by
// playwright-core; every request outside 127.0.0.1 is refused). It serves
// web/www/ from a local static server, opens the page and checks what a user
// sees: a shape-error squiggle and its message naming both shapes, a hover
// with a shape, a training cell whose loss falls and whose value equals the
// native `mlpl run` output, a chart, and a long run cancelled. It prints the
// wasm size, the first-load time and the browser's time per training step
// (MLPL_PLAYGROUND_EXAMPLE=tiny_lm for the tiny LM's).
//
// Exit: 0 pass, 1 fail, 77 skipped (no Chromium or no built page).
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { existsSync, readFileSync, statSync } from 'node:fs';
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

const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm', '.json': 'application/json' };
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

  // A hover with the checker's shape.
  await setText('w : [batch, feat] = zeros([2, 8])\nw\n');
  await page.waitForFunction(() => !document.querySelector('.cm-lintRange-error'));
  const w = page.locator('.cm-line').nth(1);
  await w.hover({ position: { x: 3, y: 5 } });
  const hover = await page.waitForSelector('.mlpl-hover', { timeout: 10000 });
  assert.equal(await hover.textContent(), '[batch=2, feat=8]');
  await page.mouse.move(0, 0);

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
  assert.match(await train.innerText(), new RegExp(`${steps} steps`));
  const points = (await train.locator('polyline').getAttribute('points')).split(' ').map((p) => Number(p.split(',')[1]));
  assert.equal(points.length, steps);
  assert.ok(points[points.length - 1] > points[0], 'the live loss curve falls (SVG y grows downwards)');

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

  assert.deepEqual(errors, []);
  console.log(
    `playground: wasm ${info.wasmBytes} bytes; first load (fetch + compile + instantiate, page) ${info.loadMs} ms; ` +
      `${example} train cell ${trainMs.toFixed(0)} ms = ${(trainMs / steps).toFixed(1)} ms/step (run all ${wallMs} ms)`,
  );
  console.log('playground browser test: ok');
} catch (e) {
  failed = true;
  console.error('playground browser test FAILED:', e);
} finally {
  await browser.close();
  server.close();
}
process.exit(failed ? 1 : 0);
