#!/usr/bin/env bash
# End-to-end test of the VS Code extension in a real VS Code build:
# code-server 4.139.1 (VS Code 1.139.1) + headless Chromium driven by playwright-core.
#
# Steps: install the toolchain into a cache outside the repository (install.sh),
# build the .vsix with the debug `mlpl` and `mlpl-lsp` from target/debug (what
# `cargo test` built), install it into an isolated code-server, open the workbench
# with the test harness (harness/test.js) as the extension test entry, and wait
# for its exit code; then reload the page with harness/reattach.js, which checks
# that the extension reattached to the session. Screenshots go to target/e2e/screenshots/.
#
# Usage: scripts/e2e/run.sh        Exit: 0 pass, 1 fail, 77 skipped (see install.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$root"

cache="$(bash "$here/install.sh")" || exit $?
node24="$cache/node/bin"
export PLAYWRIGHT_CORE="$cache/node_modules/playwright-core"
code_server="$cache/node_modules/.bin/code-server"

work="$root/target/e2e/run"
shots="$root/target/e2e/screenshots"
rm -rf "$work" "$shots"
mkdir -p "$work" "$shots"

# The workspace's npm packages (vsce, esbuild) and the debug binaries.
[ -d "$root/node_modules/@vscode/vsce" ] || npm ci --no-audit --no-fund
target_dir="${CARGO_TARGET_DIR:-$root/target}"
if [ ! -x "$target_dir/debug/mlpl" ] || [ ! -x "$target_dir/debug/mlpl-lsp" ]; then
  cargo build --locked -p mlpl-runner --bin mlpl -p mlpl-lsp --bin mlpl-lsp
fi
node vscode-extension/scripts/package.mjs --debug --out "$work/mlpl-studio.vsix" >"$work/package.log" 2>&1 ||
  { cat "$work/package.log" >&2; echo "FAIL: packaging the .vsix" >&2; exit 1; }

# An isolated, silent code-server (nothing written under ~, no outbound lookups).
export PATH="$node24:$PATH"
export XDG_CONFIG_HOME="$work/xdg" XDG_DATA_HOME="$work/xdg/data" XDG_CACHE_HOME="$work/xdg/cache" XDG_STATE_HOME="$work/xdg/state"
export EXTENSIONS_GALLERY='{"serviceUrl":""}'
export MLPL_E2E_SHOTS="$shots"
mkdir -p "$work/user/User"
cat >"$work/user/User/settings.json" <<'JSON'
{"telemetry.telemetryLevel":"off","extensions.autoCheckUpdates":false,"extensions.autoUpdate":false,
 "update.mode":"none","workbench.startupEditor":"none","workbench.tips.enabled":false,
 "window.zoomLevel":0,"editor.minimap.enabled":false,"chat.disableAIFeatures":true,
 "workbench.colorTheme":"Default Dark Modern","security.workspace.trust.enabled":false,
 "workbench.secondarySideBar.defaultVisibility":"hidden","workbench.layoutControl.enabled":false}
JSON
"$code_server" --config /dev/null --user-data-dir "$work/user" --extensions-dir "$work/ext" \
  --install-extension "$work/mlpl-studio.vsix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log" >&2; echo "FAIL: installing the .vsix into code-server" >&2; exit 1; }
cp -r "$here/workspace" "$work/workspace"

# A runner started by hand, for the remote-runner check (mlpl.runner.url + token).
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$work/remote-token"
setsid "$target_dir/debug/mlpl" serve --bind 127.0.0.1:0 --token-file "$work/remote-token" >"$work/remote.log" 2>&1 &
remote_pid=$!
for _ in $(seq 1 100); do grep -q "listening on" "$work/remote.log" 2>/dev/null && break; sleep 0.1; done
export MLPL_E2E_REMOTE_URL="$(sed -n 's/^mlpl serve listening on //p' "$work/remote.log" | head -1)"
export MLPL_E2E_REMOTE_TOKEN="$(cat "$work/remote-token")"
[ -n "$MLPL_E2E_REMOTE_URL" ] || { cat "$work/remote.log" >&2; echo "FAIL: the remote runner did not start" >&2; exit 1; }

port="$(node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
setsid "$code_server" --config /dev/null --bind-addr "127.0.0.1:$port" --auth none \
  --disable-telemetry --disable-update-check --disable-workspace-trust \
  --vscode-option enable-smoke-test-driver \
  --user-data-dir "$work/user" --extensions-dir "$work/ext" >"$work/cs.log" 2>&1 &
cs_pid=$!
cleanup() {
  kill -- "-$cs_pid" 2>/dev/null || kill "$cs_pid" 2>/dev/null || true
  kill -- "-$remote_pid" 2>/dev/null || kill "$remote_pid" 2>/dev/null || true
}
trap cleanup EXIT

healthy() { node -e 'fetch(process.argv[1]).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "http://127.0.0.1:$port/healthz"; }
for _ in $(seq 1 120); do
  healthy && break
  kill -0 "$cs_pid" 2>/dev/null || { cat "$work/cs.log" >&2; echo "FAIL: code-server exited" >&2; exit 1; }
  sleep 0.5
done
healthy || { cat "$work/cs.log" >&2; echo "FAIL: code-server is not healthy" >&2; exit 1; }

remote="vscode-remote://127.0.0.1:$port"
# One URL per phase: the test, then (same page, reloaded) the reattach check.
phase_url() {
  HARNESS="$remote$here/harness" TESTS="$remote$here/harness/$1" FOLDER="$work/workspace" PORT="$port" node -e '
const p = JSON.stringify([["extensionDevelopmentPath", process.env.HARNESS], ["extensionTestsPath", process.env.TESTS]]);
console.log(`http://127.0.0.1:${process.env.PORT}/?folder=${encodeURIComponent(process.env.FOLDER)}&payload=${encodeURIComponent(p)}`);'
}

echo "e2e: code-server on port $port, workspace $work/workspace"
start=$(date +%s)
set +e
node "$here/driver.mjs" "$shots" "${MLPL_E2E_TIMEOUT:-600}" "$(phase_url test.js)" "$(phase_url reattach.js)"
rc=$?
set -e
echo "e2e: finished in $(( $(date +%s) - start )) s; screenshots in $shots"
if [ $rc -ne 0 ]; then
  echo "--- code-server log (tail) ---" >&2
  tail -40 "$work/cs.log" >&2
  echo "FAIL: end-to-end test (exit $rc)" >&2
  exit 1
fi
echo "e2e: 1 passed, 0 failed"
