#!/usr/bin/env bash
# Step time of a mixture-of-experts model (moe_step.mlpl: E = 8, top-2,
# d = 256, 512 tokens) from `mlpl run --profile`, and the process's CPU time.
# Give more `mlpl` binaries (for example one built from an older commit) to
# time them on the same script, interleaved. Not part of CI; needs
# /usr/bin/time (Debian package `time`).
#
# Usage: bash bench/moe/run.sh [OTHER_MLPL...]
#   ROUNDS (default 3) rounds; PROFILE=dev times the dev build (whose kernel
#   crate, mlpl-devices, is optimised as in release) instead of release.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${PROFILE:-release}" = dev ]; then
  cargo build -q --bin mlpl
  BIN=target/debug/mlpl
else
  cargo build --release -q --bin mlpl
  BIN=target/release/mlpl
fi
echo "# CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) threads"
for _ in $(seq "${ROUNDS:-3}"); do
  for bin in "$@" "$BIN"; do
    line=$({ /usr/bin/time -f "cpu %U+%S s" "$bin" run --profile bench/moe/moe_step.mlpl; } 2>&1 |
      grep -E "train loop|^cpu " | tr '\n' ' ')
    echo "$bin: $line"
  done
done
