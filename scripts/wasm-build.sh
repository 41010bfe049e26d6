#!/usr/bin/env bash
# Builds the browser playground (docs/playground.md): the `mlpl-web` crate as
# WebAssembly (web/www/dist/mlpl.wasm) and the page's JavaScript bundled with
# esbuild (web/www/dist/*.js). Serve web/www/ with any static server.
#
# The rustup toolchain has no wasm32 standard library and cannot download one,
# so this uses Debian's packages: rustc-web and cargo-web (a rustc whose LLVM
# has the wasm targets), rust-web-src (the standard library's source, built
# here with -Zbuild-std) and lld-16 (wasm-ld), plus chromium for the page's
# browser test. Missing ones are installed with
# apt-get when the script runs as root or CI is set; otherwise, or when that
# fails, it says so and exits 77 (skipped). The normal build keeps using rustup.
#
#   bash scripts/wasm-build.sh           # wasm + bundle
#   bash scripts/wasm-build.sh --wasm    # only the wasm module
set -euo pipefail
cd "$(dirname "$0")/.."

RUSTC_WEB=/usr/bin/rustc
CARGO_WEB=/usr/bin/cargo
WASM_LD=/usr/lib/llvm-16/bin/wasm-ld
STD_SRC=/usr/lib/rustlib/src/rust/library

need_apt=()
[ -x "$RUSTC_WEB" ] && "$RUSTC_WEB" --print target-list 2>/dev/null | grep -qx wasm32-unknown-unknown || need_apt+=(rustc-web)
[ -x "$CARGO_WEB" ] || need_apt+=(cargo-web)
[ -d "$STD_SRC" ] || need_apt+=(rust-web-src)
[ -x "$WASM_LD" ] || need_apt+=(lld-16)
# CORE-MATH (devices/src/math.rs, the correctly rounded functions) is C: clang
# compiles it for wasm32 against wasi-libc's headers (no wasi-libc code is linked).
command -v clang-16 >/dev/null 2>&1 || need_apt+=(clang-16)
command -v llvm-ar-16 >/dev/null 2>&1 || need_apt+=(llvm-16)
[ -f /usr/include/wasm32-wasi/math.h ] || need_apt+=(wasi-libc)
# The page's headless browser test (web/www/test/browser.mjs) drives Debian's Chromium.
[ "${1:-}" = "--wasm" ] || [ -x "${CHROMIUM:-/usr/bin/chromium}" ] || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
  if { [ "$(id -u)" = 0 ] || [ -n "${CI:-}" ]; } && command -v apt-get >/dev/null 2>&1; then
    echo "wasm-build: installing ${need_apt[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo -n)
    "${sudo_cmd[@]}" apt-get update -qq >&2 || true
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >&2 ||
      { echo "SKIP: wasm-build: apt-get install ${need_apt[*]} failed; the browser playground is NOT built or tested" >&2; exit 77; }
  else
    echo "SKIP: wasm-build: missing ${need_apt[*]} (run as root or set CI=1 to let this script apt-get install them); the browser playground is NOT built or tested" >&2
    exit 77
  fi
fi

out=web/www/dist
mkdir -p "$out"

# Release, optimised for speed (the training kernels) with everything that
# shrinks the module without slowing it: one codegen unit, fat LTO, no debug
# info, symbols stripped. Its own target directory, so the native build's
# artefacts are untouched.
export RUSTC="$RUSTC_WEB" RUSTC_BOOTSTRAP=1
export CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$WASM_LD"
export CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1
export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=true
export CARGO_PROFILE_RELEASE_PANIC=abort
export CC_wasm32_unknown_unknown=clang-16 AR_wasm32_unknown_unknown=llvm-ar-16
export CFLAGS_wasm32_unknown_unknown="--target=wasm32-wasi -I$PWD/web/cshim -isystem /usr/include/wasm32-wasi -w"
"$CARGO_WEB" rustc --locked -p mlpl-web --lib --release --crate-type cdylib \
  --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
  --target-dir target/wasm
cp target/wasm/wasm32-unknown-unknown/release/mlpl_web.wasm "$out/mlpl.wasm"
echo "wasm-build: $out/mlpl.wasm, $(stat -c %s "$out/mlpl.wasm") bytes" >&2

[ "${1:-}" = "--wasm" ] && exit 0

# The page's JavaScript, bundled with esbuild (npm workspace web/www).
if [ ! -x node_modules/.bin/esbuild ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "SKIP: wasm-build: npm not found (install Node.js 20+); the playground page is NOT bundled" >&2
    exit 77
  fi
  npm ci --no-audit --no-fund >&2
fi
node web/www/build.mjs
