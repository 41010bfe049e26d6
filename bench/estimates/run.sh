#!/usr/bin/env bash
# Estimate-vs-measured sweep (docs/benchmarks.md, "Estimates"): calibrates the
# CPU with `mlpl calibrate` into a fresh cache, then for each of 40+ training
# loops compares `mlpl estimate` with `mlpl run --profile` (step time) and the
# process's peak RSS. Prints a Markdown table and the distribution.
#
# A machine whose speed drifts (a shared VM: 1.5–2× within minutes) makes one
# calibration followed by one pass a coin flip near the bar, so the sweep runs
# in rounds: each round calibrates afresh and then estimates and measures every
# loop; the report gives per loop the median ratio over the rounds, and each
# round's distribution. One round takes a few minutes (calibration about a
# minute, the loops the rest).
#
# Usage: bash bench/estimates/run.sh [--quick]
#   ROUNDS=R runs R rounds (default 1; 3 for a result to report).
#   PROFILE=debug uses the test build (target/debug/mlpl) instead of a release build.
#   KEEP=DIR keeps the calibrations, the loops and each round's results.json in
#   DIR/round-N/.
set -euo pipefail
cd "$(dirname "$0")/../.."
PROFILE="${PROFILE:-release}"
ROUNDS="${ROUNDS:-1}"
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
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) threads; build: $PROFILE; rounds: $ROUNDS"
results=()
for i in $(seq 1 "$ROUNDS"); do
  R="$WORK/round-$i"; mkdir -p "$R"
  echo "round $i of $ROUNDS: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  MLPL_CACHE_DIR="$R/cache" "$BIN" calibrate --device cpu --output "$R/calibration.json"
  if [ "$ROUNDS" = 1 ]; then
    python3 bench/estimates/sweep.py "$BIN" "$R/calibration.json" "$R/loops" "$@"
  else
    python3 bench/estimates/sweep.py "$BIN" "$R/calibration.json" "$R/loops" "$@" > "$R/report.md"
  fi
  results+=("$R/loops/results.json")
done
echo "done: $(date -u +%H:%M:%S) UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
if [ "$ROUNDS" != 1 ]; then
  python3 bench/estimates/sweep.py --rounds "${results[@]}"
fi
