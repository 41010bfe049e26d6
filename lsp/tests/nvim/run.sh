#!/usr/bin/env bash
# The Neovim client test: headless Neovim
# starts mlpl-lsp, opens shape_error.mlpl, and checks that it receives the E0203
# diagnostic and a hover with the named shape.
#
# Usage: lsp/tests/nvim/run.sh [PATH_TO_mlpl-lsp]
#   (default: target/debug/mlpl-lsp, built with `cargo build -p mlpl-lsp`)
#
# Neovim: used when `nvim` is on PATH. Otherwise, only when the environment
# variable CI is set (CI runs as root with apt), it is installed with
# `apt-get install -y neovim`. Without Neovim the script exits 77 (skipped).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
bin="${1:-${MLPL_LSP_BIN:-$root/target/debug/mlpl-lsp}}"

if ! command -v nvim >/dev/null 2>&1; then
  if [ -n "${CI:-}" ] && command -v apt-get >/dev/null 2>&1; then
    echo "nvim: not found; CI is set, installing neovim with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || true
    apt-get install -y -qq neovim >&2 || { echo "SKIP: apt-get install neovim failed" >&2; exit 77; }
  else
    echo "SKIP: nvim is not installed (set CI=1 to let this script apt-get install neovim)" >&2
    exit 77
  fi
fi
if [ ! -x "$bin" ]; then
  echo "error: $bin is not an executable mlpl-lsp (cargo build -p mlpl-lsp)" >&2
  exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cp "$here/shape_error.mlpl" "$tmp/shape_error.mlpl"
export XDG_CONFIG_HOME="$tmp/config" XDG_DATA_HOME="$tmp/data" XDG_STATE_HOME="$tmp/state" XDG_CACHE_HOME="$tmp/cache"
export MLPL_LSP_BIN="$bin" MLPL_NVIM_FILE="$tmp/shape_error.mlpl" MLPL_NVIM_OUT="$tmp/result.json"

timeout 60 nvim --headless -u NONE -i NONE -n -c "luafile $here/test.lua" </dev/null >"$tmp/nvim.log" 2>&1 || true
if [ ! -s "$tmp/result.json" ]; then
  echo "FAIL: Neovim wrote no result" >&2
  cat "$tmp/nvim.log" >&2
  exit 1
fi
result="$(cat "$tmp/result.json")"
echo "$result"
fail=0
check() { # description, extended regular expression
  if grep -qE -- "$2" <<<"$result"; then echo "ok: $1"; else echo "FAIL: $1 (no match for $2)"; fail=1; fi
}
check "diagnostic code E0203" '"code": ?"E0203"'
check "diagnostic headline" 'inner dimensions differ in `matmul`'
check "diagnostic on line 4" '"lnum": ?3'
check "hover shows the named shape" 'X: \[batch=4, feat=3\]'
exit $fail
