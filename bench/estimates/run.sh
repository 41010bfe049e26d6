#!/usr/bin/env bash
# Estimate-vs-measured sweep (docs/benchmarks.md, "Estimates"): calibrates the
# CPU with `mlpl calibrate` into a fresh cache, then for each of 40+ training
# loops compares `mlpl estimate` with `mlpl run --profile` (step time) and the
# process's peak RSS. Prints a Markdown table and the distribution. A few minutes.
#
# Usage: bash bench/estimates/run.sh [--quick]
#   PROFILE=debug uses the test build (target/debug/mlpl) instead of a release build.
#   KEEP=DIR keeps the calibration, the loops and results.json in DIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE="${PROFILE:-release}"
if [ "$PROFILE" = release ]; then
  cargo build --release -q --bin mlpl
else
  cargo build -q --bin mlpl --features mlpl-devices/cuda
fi
BIN="target/$PROFILE/mlpl"
# The sweep's runs must not teach the user's calibration cache a correction.
export MLPL_NO_REFINE=1
if [ -n "${KEEP:-}" ]; then
  WORK="$KEEP"; mkdir -p "$WORK"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) threads; build: $PROFILE"
MLPL_CACHE_DIR="$WORK/cache" "$BIN" calibrate --device cpu --output "$WORK/calibration.json"
python3 bench/estimates/sweep.py "$BIN" "$WORK/calibration.json" "$WORK/loops" "$@"
