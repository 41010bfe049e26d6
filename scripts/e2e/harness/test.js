// The end-to-end test, run inside VS Code's extension host (code-server) against
// the installed MLPL Studio .vsix. Driven by scripts/e2e/driver.mjs, which also
// takes the screenshots this test asks for (MLPL_E2E_SCREENSHOT lines).
"use strict";
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");

const shotsDir = process.env.MLPL_E2E_SHOTS;

function log(msg) {
  console.log(`[e2e] ${msg}`);
}

async function waitFor(what, fn, timeoutMs = 30000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await fn();
      if (last) {
        return last;
      }
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Asks the driver for a screenshot and waits until it is written. */
async function screenshot(name) {
  if (!shotsDir) {
    return;
  }
  const done = path.join(shotsDir, `${name}.done`);
  console.log(`MLPL_E2E_SCREENSHOT ${name}`);
  // Generous: the "running" shot is taken while a training loop keeps both
  // cores busy; one CI run saw it take over 20 s, and a 2-core AMD EPYC
  // (Zen-1 class) about 60 s.
  await waitFor(`screenshot ${name}`, () => fs.existsSync(done), 180000);
}

/** Asks the driver to click the element `selector` (no spaces; in any frame) and waits until it did; `name`: letters, digits and `_`. */
async function click(name, selector) {
  assert.ok(shotsDir, "MLPL_E2E_SHOTS is set (the driver's directory)");
  const done = path.join(shotsDir, `${name}.done`);
  const failed = path.join(shotsDir, `${name}.failed`);
  console.log(`MLPL_E2E_CLICK ${name} ${selector}`);
  await waitFor(`the click ${name}`, () => fs.existsSync(done) || fs.existsSync(failed), 60000);
  assert.ok(!fs.existsSync(failed), `click ${name}: ${fs.existsSync(failed) ? fs.readFileSync(failed, "utf8") : ""}`);
}

function codeOf(d) {
  return typeof d.code === "object" && d.code !== null ? String(d.code.value) : String(d.code);
}

function hoverText(hovers) {
  return hovers
    .flatMap((h) => h.contents)
    .map((c) => (typeof c === "string" ? c : c.value))
    .join("\n---\n");
}

function positionOf(doc, line, needle) {
  const col = doc.lineAt(line).text.indexOf(needle);
  assert.ok(col >= 0, `\`${needle}\` not on line ${line + 1}`);
  return new vscode.Position(line, col);
}

async function run() {
  const ext = vscode.extensions.getExtension("mlpl.mlpl-studio");
  assert.ok(ext, "the MLPL Studio extension is not installed");
  const api = await ext.activate();
  await api.languageServerReady;
  log(`extension ${ext.packageJSON.version} active from ${ext.extensionPath}`);
  const folder = vscode.workspace.workspaceFolders[0].uri;
  await vscode.commands.executeCommand("workbench.action.closeAllEditors");

  // 1. A shape error: the diagnostic's code and line.
  const errDoc = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(folder, "shape_error.mlpl"));
  const errEditor = await vscode.window.showTextDocument(errDoc);
  const diags = await waitFor("diagnostics of shape_error.mlpl", () => {
    const d = vscode.languages.getDiagnostics(errDoc.uri).filter((x) => x.source === "mlpl");
    return d.some((x) => codeOf(x) === "E0203") ? d : undefined;
  });
  const e0203 = diags.find((x) => codeOf(x) === "E0203");
  assert.equal(e0203.range.start.line, 3, "E0203 is on line 4 (matmul(X, W))");
  assert.equal(e0203.severity, vscode.DiagnosticSeverity.Error);
  assert.match(e0203.message, /inner dimensions differ/);
  log(`diagnostic ${codeOf(e0203)} on line ${e0203.range.start.line + 1}: ${e0203.message.split("\n")[0]}`);
  errEditor.selection = new vscode.Selection(8, 0, 8, 0);
  await vscode.commands.executeCommand("workbench.actions.view.problems");
  await sleep(1500);
  await screenshot("squiggle");
  await vscode.commands.executeCommand("workbench.action.closePanel");

  // 2. Hovers: a named shape, and an estimate on the `train` block.
  const xPos = positionOf(errDoc, 3, "X");
  const xHover = hoverText(await vscode.commands.executeCommand("vscode.executeHoverProvider", errDoc.uri, xPos));
  assert.match(xHover, /X: \[batch=4, feat=3\]/, `hover on X: ${xHover}`);
  const trainLine = errDoc.getText().split("\n").findIndex((l) => l.startsWith("train "));
  const trainPos = positionOf(errDoc, trainLine, "train");
  const trainHover = hoverText(await vscode.commands.executeCommand("vscode.executeHoverProvider", errDoc.uri, trainPos));
  log(`hover on train: ${trainHover.replace(/\n/g, " | ").slice(0, 400)}`);
  assert.match(trainHover, /estimate|parameters|memory/i, `hover on train shows no estimate: ${trainHover}`);
  assert.match(trainHover, /\d+(\.\d+)?\s*(ns|µs|us|ms|s|min|h)\b/, `the estimate has no time: ${trainHover}`);
  const modelHover = hoverText(await vscode.commands.executeCommand("vscode.executeHoverProvider", errDoc.uri, positionOf(errDoc, trainLine + 1, "model")));
  log(`hover on model: ${modelHover.replace(/\n/g, " | ").slice(0, 300)}`);
  // Every other server feature reaches VS Code's providers.
  const completions = await vscode.commands.executeCommand("vscode.executeCompletionItemProvider", errDoc.uri, new vscode.Position(3, 4));
  const labels = completions.items.map((i) => (typeof i.label === "string" ? i.label : i.label.label));
  assert.ok(labels.includes("matmul") && labels.includes("X"), `completion: ${labels.slice(0, 20).join(", ")}`);
  const sig = await vscode.commands.executeCommand("vscode.executeSignatureHelpProvider", errDoc.uri, positionOf(errDoc, 3, "X, W"));
  assert.ok(sig && sig.signatures.length && /matmul/.test(sig.signatures[0].label), `signature help: ${sig && sig.signatures.map((x) => x.label)}`);
  const fullRange = new vscode.Range(0, 0, errDoc.lineCount, 0);
  const hints = await vscode.commands.executeCommand("vscode.executeInlayHintProvider", errDoc.uri, fullRange);
  const hintText = (h) => (typeof h.label === "string" ? h.label : h.label.map((p) => p.value).join(""));
  assert.ok(hints.some((h) => hintText(h).includes("[batch=4, feat=3]")), `inlay hints: ${hints.map(hintText).join(" | ")}`);
  const tokens = await vscode.commands.executeCommand("vscode.provideDocumentSemanticTokens", errDoc.uri);
  assert.ok(tokens && tokens.data.length > 0, "semantic tokens");
  const actions = await vscode.commands.executeCommand("vscode.executeCodeActionProvider", errDoc.uri, e0203.range);
  log(`completion ${labels.length} items; signature \`${sig.signatures[0].label}\`; ${hints.length} inlay hints; ${tokens.data.length / 5} semantic tokens; ${actions.length} code actions (${actions.map((a) => a.title).join("; ")})`);
  // A quick fix: a misspelt builtin in an untitled document is replaced.
  const typo = await vscode.workspace.openTextDocument({ language: "mlpl", content: "x = iota(3)\ny = matmull(x, x)\n" });
  const typoDiag = await waitFor("E0102 on the misspelt builtin", () =>
    vscode.languages.getDiagnostics(typo.uri).find((d) => d.source === "mlpl" && codeOf(d) === "E0102"));
  const fixes = await vscode.commands.executeCommand("vscode.executeCodeActionProvider", typo.uri, typoDiag.range);
  const fix = fixes.find((a) => /Replace with `matmul`/.test(a.title));
  assert.ok(fix && fix.edit, `quick fixes: ${fixes.map((a) => a.title).join("; ")}`);
  assert.ok(await vscode.workspace.applyEdit(fix.edit));
  assert.equal(typo.lineAt(1).text, "y = matmul(x, x)");
  await waitFor("E0102 gone after the fix", () => !vscode.languages.getDiagnostics(typo.uri).some((d) => codeOf(d) === "E0102"));
  log(`quick fix applied: ${fix.title}`);
  await vscode.window.showTextDocument(typo);
  await vscode.commands.executeCommand("workbench.action.revertAndCloseActiveEditor");
  await vscode.window.showTextDocument(errDoc, vscode.ViewColumn.One);

  // The setting mlpl.inlayHints.shapes reaches the server.
  const cfg = vscode.workspace.getConfiguration("mlpl");
  await cfg.update("inlayHints.shapes", false, vscode.ConfigurationTarget.Workspace);
  await waitFor("no inlay hints with mlpl.inlayHints.shapes off", async () => {
    const h = await vscode.commands.executeCommand("vscode.executeInlayHintProvider", errDoc.uri, fullRange);
    return h.length === 0;
  }, 10000);
  await cfg.update("inlayHints.shapes", undefined, vscode.ConfigurationTarget.Workspace);
  await waitFor("inlay hints back", async () => {
    const h = await vscode.commands.executeCommand("vscode.executeInlayHintProvider", errDoc.uri, fullRange);
    return h.length > 0;
  }, 10000);

  // Screenshots of both hovers; the editor is reopened in between to dismiss the first.
  errEditor.selection = new vscode.Selection(xPos, xPos);
  await vscode.commands.executeCommand("editor.action.showHover");
  await sleep(1500);
  await screenshot("hover");
  await vscode.commands.executeCommand("workbench.action.closeActiveEditor");
  // The estimate lens on the train block shows that hover (command mlpl.showEstimate).
  const errLensList = await vscode.commands.executeCommand("vscode.executeCodeLensProvider", errDoc.uri);
  const estimate = errLensList.find((x) => x.command && x.command.command === "mlpl.showEstimate");
  assert.ok(estimate, `an estimate lens: ${errLensList.map((x) => x.command && x.command.command).join(", ")}`);
  assert.match(estimate.command.title, /on CPU/);
  await vscode.commands.executeCommand(estimate.command.command, ...estimate.command.arguments);
  assert.equal(vscode.window.activeTextEditor.selection.active.line, trainLine, "the estimate lens put the cursor on `train`");
  log(`estimate lens: ${estimate.command.title}`);
  await sleep(1500);
  await screenshot("hover_estimate");
  await vscode.commands.executeCommand("workbench.action.closeActiveEditor");

  // 3. Run Cell lenses on a small training file: the model cell, then the train cell.
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(folder, "train.mlpl"));
  await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
  const lenses = await waitFor("Run Cell lenses", async () => {
    const l = await vscode.commands.executeCommand("vscode.executeCodeLensProvider", doc.uri);
    return l && l.filter((x) => x.command && x.command.command === "mlpl.runCell").length >= 3 ? l : undefined;
  });
  const runCell = (index) => lenses.find((x) => x.command && x.command.command === "mlpl.runCell" && x.command.arguments[0].cellIndex === index);
  assert.ok(runCell(0) && runCell(1), "a Run Cell lens on each cell");
  assert.equal(runCell(1).command.title.includes("Run Cell"), true);
  log(`lenses: ${lenses.map((x) => x.command && x.command.title).join(" | ")}`);

  for (const index of [0, 1]) {
    const lens = runCell(index);
    const before = api.model().runs.length;
    await vscode.commands.executeCommand(lens.command.command, ...lens.command.arguments);
    const run = await waitFor(`run of cell ${index}`, () => {
      const r = api.model().runs[api.model().runs.length - 1];
      return api.model().runs.length > before && r.status !== "running" ? r : undefined;
    }, 120000);
    assert.equal(run.status, "ok", `cell ${index} ended ${run.status}: ${JSON.stringify(run.diagnostic)}`);
    log(`cell ${index}: run ${run.id} ${run.status} in ${run.elapsedMs} ms, ${run.loops.reduce((n, l) => n + l.steps.length, 0)} step events`);
  }
  const trainRun = api.model().runs[api.model().runs.length - 1];
  assert.equal(trainRun.cell.index, 1);
  assert.equal(trainRun.loops.length, 1);
  assert.equal(trainRun.loops[0].steps[trainRun.loops[0].steps.length - 1], 600, "the last step event reports step 600");

  // The panel drew the run's step events, and the loss went down.
  const summary = await waitFor("the panel to draw the training run", () => {
    const s = api.panelSummary();
    return s && s.run === trainRun.id && s.status === "ok" && s.loops.length === 1 ? s : undefined;
  }, 30000);
  const loop = summary.loops[0];
  const losses = loop.losses.filter((x) => x !== null);
  assert.ok(loop.points >= 3, `the panel got ${loop.points} step events`);
  assert.ok(losses[losses.length - 1] < losses[0] * 0.5, `loss did not decrease: ${losses[0]} -> ${losses[losses.length - 1]}`);
  log(`panel: ${loop.points} step events, loss ${losses[0].toFixed(4)} -> ${losses[losses.length - 1].toFixed(4)}`);

  // The Variables view lists the trained model.
  const items = await waitFor("the model in the Variables view", () => {
    const v = api.variablesViewItems();
    return v.some((x) => x.label === "model") ? v : undefined;
  });
  const model = items.find((x) => x.label === "model");
  assert.match(model.description, /^model/, `model item: ${model.description}`);
  assert.ok(items.some((x) => x.label === "X" && x.description.includes("[sample=512, feat=2]")), `X item: ${JSON.stringify(items)}`);
  log(`variables: ${items.map((x) => `${x.label} (${x.description})`).join(", ")}`);

  await vscode.commands.executeCommand("mlpl.variables.focus");
  await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
  await sleep(1500);
  await screenshot("panel");

  // Run Cell and Advance (Shift+Enter): runs the cell at the cursor, moves to the next.
  const trainEditor = await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
  trainEditor.selection = new vscode.Selection(2, 0, 2, 0);
  const beforeAdvance = api.model().runs.length;
  await vscode.commands.executeCommand("mlpl.runCellAndAdvance");
  const advanced = await waitFor("the run of cell 0", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return api.model().runs.length > beforeAdvance && r.status !== "running" ? r : undefined;
  });
  assert.equal(advanced.cell.index, 0);
  assert.equal(advanced.status, "ok");
  const markerLine = doc.getText().split("\n").findIndex((l) => l.startsWith("# %% Train"));
  assert.equal(vscode.window.activeTextEditor.selection.active.line, markerLine + 1, "the cursor moved into the next cell");

  // An SVG chart from a cell is shown in the panel.
  const chartLens = runCell(2);
  assert.ok(chartLens, "a Run Cell lens on the chart cell");
  const beforeChart = api.model().runs.length;
  await vscode.commands.executeCommand(chartLens.command.command, ...chartLens.command.arguments);
  const chartRun = await waitFor("the chart run", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return api.model().runs.length > beforeChart && r.status !== "running" ? r : undefined;
  }, 60000);
  assert.equal(chartRun.status, "ok", JSON.stringify(chartRun.diagnostic));
  assert.ok(chartRun.artifacts.length === 1 && chartRun.artifacts[0].content.startsWith("<svg"), "an SVG artifact with content");
  await waitFor("the chart in the panel", () => {
    const s = api.panelSummary();
    return s && s.run === chartRun.id && s.images === 1;
  }, 20000);
  log(`chart: ${chartRun.artifacts[0].bytes} bytes of SVG shown in the panel`);
  await screenshot("chart");

  // Run Cell with Trace: the run's timeline (statements, the train loop, its
  // iterations and its kernels) is drawn in the panel.
  const beforeTrace = api.model().runs.length;
  await vscode.commands.executeCommand("mlpl.runCellWithTrace", ...runCell(1).command.arguments);
  const traced = await waitFor("the traced run", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return api.model().runs.length > beforeTrace && r.status !== "running" ? r : undefined;
  }, 120000);
  assert.equal(traced.status, "ok", JSON.stringify(traced.diagnostic));
  const timelineArtifact = traced.artifacts.find((a) => a.kind === "timeline");
  assert.ok(timelineArtifact && timelineArtifact.content.includes("traceEvents"), "a timeline artifact");
  const drawn = await waitFor("the timeline in the panel", () => {
    const s = api.panelSummary();
    return s && s.run === traced.id && s.timeline ? s.timeline : undefined;
  }, 30000);
  assert.ok(drawn.statements >= 2, `statements drawn: ${JSON.stringify(drawn)}`);
  assert.equal(drawn.loops, 1, `loops drawn: ${JSON.stringify(drawn)}`);
  assert.ok(drawn.steps >= 1 && drawn.kernels >= 1, `iterations and kernels drawn: ${JSON.stringify(drawn)}`);
  log(`timeline: ${drawn.statements} statements, ${drawn.loops} loop, ${drawn.steps} iterations, ${drawn.kernels} kernels in the panel`);
  await screenshot("timeline");

  // Clicking a statement in the panel's timeline shows its lines in the editor:
  // the cell's multi-line `train` statement, with the cursor elsewhere first.
  const statements = JSON.parse(timelineArtifact.content).traceEvents.filter((e) => e.cat === "statement");
  const target = statements.find((e) => e.args.end_line > e.args.line);
  assert.ok(target, `a multi-line statement in the timeline: ${JSON.stringify(statements.map((e) => e.args))}`);
  const elsewhere = await vscode.window.showTextDocument(doc, vscode.ViewColumn.One);
  const lastLine = doc.lineCount - 1;
  elsewhere.selection = new vscode.Selection(lastLine, 0, lastLine, 0);
  await click("timeline_statement", `.timeline-bar.statement[data-line="${target.args.line}"]`);
  const revealed = await waitFor("the clicked statement's lines selected in the editor", () => {
    const e = vscode.window.activeTextEditor;
    return e &&
      e.document.uri.toString() === traced.cell.uri &&
      e.selection.start.line === target.args.line - 1 &&
      e.selection.end.line === target.args.end_line - 1
      ? e
      : undefined;
  });
  assert.ok(revealed.visibleRanges.some((r) => r.contains(revealed.selection.start)), "the statement is scrolled into view");
  log(`timeline: clicking \`${target.name}\` selected lines ${target.args.line}–${target.args.end_line} of ${path.basename(revealed.document.uri.fsPath)}`);
  await screenshot("timeline_reveal");

  // Cancel: a long run stops at the end of a step and the session lives on.
  const longDoc = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(folder, "long.mlpl"));
  await vscode.window.showTextDocument(longDoc, vscode.ViewColumn.One);
  const beforeLong = api.model().runs.length;
  const longDone = vscode.commands.executeCommand("mlpl.runCell");
  const longRun = await waitFor("the long run's step events", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return api.model().runs.length > beforeLong && r.status === "running" && r.loops.length && r.loops[0].steps.length >= 2 ? r : undefined;
  }, 60000);
  // The log-scale toggle (its setting; the panel's checkbox writes the same setting).
  await vscode.workspace.getConfiguration("mlpl").update("panel.logScale", true, vscode.ConfigurationTarget.Workspace);
  await sleep(2500);
  await screenshot("running");
  // Cancel first, then reset the setting: on a slow 2-core machine the
  // settings write (its save participants time out) did not return, and the
  // cancel behind it was never sent. The reset gets 10 s, then the test goes on.
  await vscode.commands.executeCommand("mlpl.cancelRun");
  await longDone;
  const cancelled = await api.waitForRun(longRun.id);
  await Promise.race([
    vscode.workspace.getConfiguration("mlpl").update("panel.logScale", undefined, vscode.ConfigurationTarget.Workspace),
    sleep(10000),
  ]);
  assert.equal(cancelled.status, "cancelled");
  assert.equal(cancelled.diagnostic.code, "E0409");
  const lastStep = cancelled.loops[0].steps[cancelled.loops[0].steps.length - 1];
  assert.ok(lastStep < 100000000, `cancelled at step ${lastStep}`);
  log(`cancelled run ${cancelled.id} at step ${lastStep}`);

  // 4. A failing run: its error is a diagnostic of its own source on the right line,
  // and the session lives on.
  const errLenses = await vscode.commands.executeCommand("vscode.executeCodeLensProvider", errDoc.uri);
  const errLens = errLenses.find((x) => x.command && x.command.command === "mlpl.runCell" && x.command.arguments[0].cellIndex === 0);
  assert.ok(errLens, "a Run Cell lens on the first cell of shape_error.mlpl");
  const before = api.model().runs.length;
  await vscode.commands.executeCommand(errLens.command.command, ...errLens.command.arguments);
  const failed = await waitFor("the failing run", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return api.model().runs.length > before && r.status !== "running" ? r : undefined;
  }, 60000);
  assert.equal(failed.status, "error");
  const runDiag = await waitFor("a run diagnostic", () => vscode.languages.getDiagnostics(errDoc.uri).find((d) => d.source === "mlpl run"));
  assert.equal(runDiag.range.start.line, 3, `run error on line ${runDiag.range.start.line + 1}`);
  log(`run error: ${codeOf(runDiag)} on line ${runDiag.range.start.line + 1}: ${runDiag.message.split("\n")[0]}`);
  assert.ok(api.variablesViewItems().some((x) => x.label === "model"), "the session kept its variables after the failed run");
  // For the second phase (reattach.js, after a window reload).
  if (shotsDir) {
    await api.refreshVariables();
    fs.writeFileSync(path.join(shotsDir, "session.json"), JSON.stringify({ session: api.session(), variables: api.variablesViewItems() }));
  }
  log("all checks passed");
}

module.exports = { run };
