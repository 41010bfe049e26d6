#!/usr/bin/env bash
# Peak RSS of `mlpl run` on a 4-block, 4-head, d = 512, T = 1024 language
# model (long_lm.mlpl), minus the peak RSS of a run of a one-line script (the
# process's baseline), and the profile of the same run (`--profile`: whether
# its steps were captured and replayed). Also the tiled attention kernel
# against the composed path (devices/examples/bench_attention.rs). Not part of
# CI; needs /usr/bin/time (Debian package `time`).
#
# Usage: bash bench/attention/run.sh [LENGTHS...]   (kernel benchmark lengths,
# default 128 512 1024 2048)
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q --bin mlpl
cargo build --release -q -p mlpl-devices --example bench_attention
BIN=target/release/mlpl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) threads"
echo "1" >"$WORK/empty.mlpl"
peak_kib() {
  /usr/bin/time -f "%M" -o "$WORK/rss" "$BIN" run "$@" >"$WORK/out" 2>"$WORK/err"
  cat "$WORK/rss"
}
base=$(peak_kib "$WORK/empty.mlpl")
model=$(peak_kib bench/attention/long_lm.mlpl)
echo "peak RSS of long_lm.mlpl: $((model / 1024)) MiB; baseline $((base / 1024)) MiB; difference $(((model - base) / 1024)) MiB"
echo "== mlpl run --profile bench/attention/long_lm.mlpl"
"$BIN" run --profile bench/attention/long_lm.mlpl 2>&1 | head -n 40
echo "== tiled attention vs the composed path (forward + backward)"
target/release/examples/bench_attention "$@"
