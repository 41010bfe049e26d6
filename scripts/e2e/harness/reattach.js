// Second phase of the end-to-end test, after the window was reloaded (the same
// page loaded again): the extension must reattach to the session the first phase
// used (its id is in the workspace state) and show its variables, restored by the
// runner from its state directory.
"use strict";
const assert = require("node:assert/strict");
const fs = require("node:fs");
const path = require("node:path");
const vscode = require("vscode");

async function waitFor(what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const v = await fn();
    if (v) {
      return v;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

async function run() {
  const before = JSON.parse(fs.readFileSync(path.join(process.env.MLPL_E2E_SHOTS, "session.json"), "utf8"));
  assert.ok(before.session, "the first phase saved its session id");
  const api = await vscode.extensions.getExtension("mlpl.mlpl-studio").activate();
  const session = await waitFor("the extension to reattach", () => api.session());
  assert.equal(session, before.session, "reattached to the same session");
  // Every variable comes back as it was, except models, which the runner cannot
  // restore yet (their parameters are restored as ordinary bindings).
  const expected = before.variables.filter((v) => !v.description.startsWith("model"));
  const items = await waitFor("restored variables", () => {
    const v = api.variablesViewItems();
    return v.length >= expected.length ? v : undefined;
  });
  for (const v of expected) {
    const now = items.find((x) => x.label === v.label);
    assert.ok(now, `${v.label} is missing after the reload`);
    assert.equal(now.description, v.description, `${v.label} after the reload`);
  }
  console.log(`[e2e] reattached to ${session}; variables: ${items.map((x) => `${x.label} (${x.description})`).join(", ")}`);

  // A runner started by hand: mlpl.runner.url, with the token in the secret storage.
  const url = process.env.MLPL_E2E_REMOTE_URL;
  const token = process.env.MLPL_E2E_REMOTE_TOKEN;
  assert.ok(url && token, "run.sh starts a runner for this check");
  await vscode.commands.executeCommand("mlpl.setRunnerToken", token);
  await vscode.workspace.getConfiguration("mlpl").update("runner.url", url, vscode.ConfigurationTarget.Workspace);
  const doc = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(vscode.workspace.workspaceFolders[0].uri, "train.mlpl"));
  const editor = await vscode.window.showTextDocument(doc);
  editor.selection = new vscode.Selection(2, 0, 2, 0);
  await vscode.commands.executeCommand("mlpl.runCell");
  const run = await waitFor("the run on the remote runner", () => {
    const r = api.model().runs[api.model().runs.length - 1];
    return r && r.status !== "running" ? r : undefined;
  });
  assert.equal(run.status, "ok");
  const remote = api.session();
  assert.notEqual(remote, session, "a new session on the other runner");
  const listed = await (await fetch(`${url}/v1/sessions`, { headers: { Authorization: `Bearer ${token}` } })).json();
  assert.ok(listed.sessions.some((s) => s.id === remote && s.runs === 1), `the remote runner has the session: ${JSON.stringify(listed)}`);
  console.log(`[e2e] remote runner ${url}: session ${remote}, run ${run.id} ${run.status}`);
}

module.exports = { run };
