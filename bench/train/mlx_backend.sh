#!/usr/bin/env bash
# MLPL on its MLX backend against MLX itself: the tiny-LM training step of
# bench/train (tiny_lm.mlpl.in) run by `mlpl run --device mlx` and by MLX's own
# Python `mx.compile` of the same step (peers.py mlx), in the same venv (the same
# MLX), interleaved (one round = each of them once per d), plus MLPL on its CPU
# backend for the CPU/MLX crossover. Reports the median ms/step and the ratios
# (docs/benchmarks.md, "MLPL on MLX vs MLX"). Not part of CI.
#
# Linux: MLX's CPU backend from PyPI (scripts/mlx-venv.sh). On a Mac with Apple
# silicon the same command measures Metal (feature mlx-metal, MLX's GPU device).
#
# Usage: bash bench/train/mlx_backend.sh [ROUNDS]   (DS="32 64", STEPS=20,
#        PROFILE=release|dev, MLPL_BIN=path to an mlpl built with the MLX backend)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
DS="${DS:-32 64 128}"
STEPS="${STEPS:-20}"
PROFILE="${PROFILE:-release}"
if [ "$(uname -s)" = Darwin ]; then
  FEATURES=mlpl-devices/mlx-metal
  VENV=bench/.venv-mlx-metal
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -c "import mlx.core, numpy" 2>/dev/null || "$VENV/bin/pip" install -q "mlx==0.32.2" numpy
else
  FEATURES=mlpl-devices/mlx
  eval "$(bash scripts/mlx-venv.sh | grep '^export ')"
  VENV=.venv-mlx
  "$VENV/bin/python" -c "import mlx.core, numpy" 2>/dev/null || "$VENV/bin/pip" install -q "mlx[cpu]==0.32.2" numpy
fi
if [ -n "${MLPL_BIN:-}" ]; then # an mlpl built with the MLX backend already
  BIN="$MLPL_BIN"
else
  cargo build --profile "$PROFILE" -q --bin mlpl --features "$FEATURES"
  dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
  BIN="target/$dir/mlpl"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT="$WORK/results.jsonl"
mlpl_ms() { # d device -> ms/step of the steady state (median of the replayed steps)
  local d=$1 device=$2 steps=$((STEPS + 5))
  sed "s/@D@/$d/; s/@STEPS@/$steps/" bench/train/tiny_lm.mlpl.in >"$WORK/b.mlpl"
  "$BIN" run --device "$device" --profile "$WORK/b.mlpl" 2>"$WORK/profile.txt" >/dev/null
  python3 - "$WORK/profile.txt" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
m = re.search(r"replayed from the captured step \(\w+\) in [\d.]+ ms, [\d.]+ ms each \(median ([\d.]+) ms\)", t)
if m:
    print(m.group(1))
else:
    m = re.search(r"(\d+) iterations in ([\d.]+) ms", t)
    print(round(float(m.group(2)) / int(m.group(1)), 3))
PY
}
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for d in $DS; do
    echo "{\"impl\": \"mlpl_mlx\", \"d\": $d, \"ms_per_step\": $(mlpl_ms "$d" mlx)}" >>"$OUT"
    # peers.py takes bench/train's configurations; the tiny LM is 1x1-dD-T32-b64.
    "$VENV/bin/python" bench/train/peers.py mlx "1x1-d$d-T32-b64" "$STEPS" |
      sed "s/\"config\": \"1x1-d$d-T32-b64\"/\"d\": $d/" >>"$OUT"
    echo "{\"impl\": \"mlpl_cpu\", \"d\": $d, \"ms_per_step\": $(mlpl_ms "$d" cpu)}" >>"$OUT"
  done
done
echo "machine: $(nproc) cores, $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' || sysctl -n machdep.cpu.brand_string); mlx $("$VENV/bin/python" -c 'import mlx.core as mx; print(mx.__version__, mx.default_device())'); mlpl $PROFILE build"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ds = sorted({r["d"] for r in rows})
print("| d | MLPL on MLX ms/step | MLX mx.compile ms/step | MLPL on CPU ms/step | MLPL-on-MLX / MLX | MLPL-on-CPU / MLPL-on-MLX |")
print("|---|---|---|---|---|---|")
for d in ds:
    med = {i: statistics.median([r["ms_per_step"] for r in rows if r["d"] == d and r["impl"] == i])
           for i in ("mlpl_mlx", "mlx", "mlpl_cpu")}
    print(f"| {d} | {med['mlpl_mlx']:.2f} | {med['mlx']:.2f} | {med['mlpl_cpu']:.2f} | "
          f"{med['mlpl_mlx'] / med['mlx']:.2f} | {med['mlpl_cpu'] / med['mlpl_mlx']:.2f} |")
PY
