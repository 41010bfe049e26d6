#!/usr/bin/env bash
# Step time of a mixture-of-experts model (moe_step.mlpl: E = 8, top-2,
# d = 256, 512 tokens) from `mlpl run --profile`. Give a second `mlpl` binary
# (for example one built from an older commit) to time it on the same script.
# Not part of CI.
#
# Usage: bash bench/moe/run.sh [OTHER_MLPL]
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q --bin mlpl
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) threads"
for bin in target/release/mlpl "$@"; do
  echo "== $bin run --profile bench/moe/moe_step.mlpl"
  "$bin" run --profile bench/moe/moe_step.mlpl 2>&1 | head -n 30
done
