#!/usr/bin/env bash
# CPU backend vs NumPy: f32 matmul GFLOP/s at square sizes 64..1024 and the
# per-call overhead of a tiny element-wise add. Not a test.
#
# Runs the Rust bench (devices/examples/bench_gemm.rs, release) and NumPy
# (bench/devices/gemm_numpy.py) interleaved, A B A B A B, and prints a Markdown
# table of the best result of the 3 rounds for each, with the speed ratio.
# Usage: bash bench/devices/run.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
VENV=bench/.venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q numpy
fi
cargo build --release -q -p mlpl-devices --example bench_gemm
BIN=target/release/examples/bench_gemm
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  "$BIN" >>"$OUT"
  # OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set on this machine; unset them so
  # OpenBLAS detects the CPU itself, as it would for a user.
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$VENV/bin/python" bench/devices/gemm_numpy.py >>"$OUT"
done
NUMPY_VERSION=$("$VENV/bin/python" -c 'import numpy; print(numpy.__version__)')
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); rustc $(rustc --version | cut -d' ' -f2); numpy $NUMPY_VERSION; best of $ROUNDS interleaved rounds"
echo
python3 - "$OUT" <<'PY'
import sys
best = {}
for line in open(sys.argv[1]):
    who, what, size, val = line.split()
    key = (what, int(size) if size.isdigit() else size)
    v = float(val)
    prev = best.setdefault(key, {}).get(who)
    better = (prev is None or (v > prev if what == "matmul" else v < prev))
    if better:
        best[key][who] = v
print("| benchmark | mlpl-devices (cpu) | NumPy | mlpl / NumPy speed |")
print("|---|---:|---:|---:|")
for (what, size), r in sorted(best.items(), key=lambda kv: (kv[0][0] != "matmul", str(kv[0][1]).zfill(6))):
    m, n = r.get("mlpl"), r.get("numpy")
    if what == "matmul":
        print(f"| matmul f32 {size}x{size} (GFLOP/s) | {m:.1f} | {n:.1f} | {m / n:.2f}x |")
    else:
        print(f"| tiny add, 4 elements (ns/call) | {m:.0f} | {n:.0f} | {n / m:.2f}x |")
PY
