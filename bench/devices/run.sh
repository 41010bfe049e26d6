#!/usr/bin/env bash
# CPU backend's GEMM vs NumPy (OpenBLAS) and PyTorch (torch.mm: oneDNN/MKL):
# f32 matmul GFLOP/s on square sizes and on the products of the training step
# of bench/train (N = 2048 tokens, V = 280: the projections, the MLP's up and
# down products, the logits and the transposed products of their backward),
# plus the per-call overhead of a tiny element-wise add. Not a test.
#
# Runs the Rust bench (devices/examples/bench_gemm.rs, release), NumPy and
# PyTorch (bench/devices/gemm_peers.py) interleaved, A B C A B C ..., every
# program timing every case as the best of 5 batches of ~0.15 s, and prints a
# Markdown table of the best of the rounds for each, with MLPL's speed over the
# fastest peer's per row (1.00 = as fast as the fastest; the target is >= 0.95).
# Takes about 2 minutes a round with the default cases.
#
# Usage: bash bench/devices/run.sh [ROUNDS]
#   SQUARE="64 128 256 512 1024"  square sizes n (n x n x n)
#   DS="128 256 512"              widths d of the step's products
#   CASES="..."                   instead of both: cases `MxNxK.LL` (see bench_gemm.rs)
#   COPIES=8                      every program cycles through 8 copies of each case's
#                                 operands (out of the caches, as in a training step)
#   ISA=avx2                      every program limited to AVX2 (an AVX2-only machine
#                                 on an AVX-512 one): MLPL_CPU_ISA=avx2, OpenBLAS's
#                                 Haswell kernels, MKL's and oneDNN's AVX2 paths
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
SQUARE="${SQUARE-64 128 256 512 1024}"
DS="${DS-128 256 512}"
N=2048
V=280
if [ -z "${CASES:-}" ]; then
  CASES=""
  for n in $SQUARE; do CASES+=" ${n}x${n}x${n}.nn"; done
  for d in $DS; do
    f=$((4 * d))
    # forward: q/k/v/o projection, MLP up, MLP down, logits
    CASES+=" ${N}x${d}x${d}.nn ${N}x${f}x${d}.nn ${N}x${d}x${f}.nn ${N}x${V}x${d}.nn"
    # backward: dX = dY·Wᵀ (B transposed), dW = Xᵀ·dY (A transposed)
    CASES+=" ${N}x${d}x${d}.nt ${N}x${d}x${f}.nt ${N}x${f}x${d}.nt ${N}x${d}x${V}.nt"
    CASES+=" ${d}x${d}x${N}.tn ${d}x${f}x${N}.tn ${f}x${d}x${N}.tn ${d}x${V}x${N}.tn"
  done
fi
VENV=bench/.venv-peers
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q torch jax "mlx[cpu]" numpy
fi
cargo build --release -q -p mlpl-devices --example bench_gemm
BIN=target/release/examples/bench_gemm
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
# OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE may be set on this machine; unset them so
# OpenBLAS detects the CPU itself, as it would for a user. Two threads each.
# shellcheck source=bench/isa.sh
. bench/isa.sh
peer() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_NUM_THREADS=2 OMP_NUM_THREADS=2 "${ISA_LIMIT[@]}" \
    "$VENV/bin/python" bench/devices/gemm_peers.py "$@"
}
if [ -n "${COPIES:-}" ]; then export MLPL_BENCH_COPIES="$COPIES"; fi
START=$(date -u +%H:%M)
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  # shellcheck disable=SC2086
  "$BIN" $CASES >>"$OUT"
  # shellcheck disable=SC2086
  peer numpy $CASES >>"$OUT"
  # shellcheck disable=SC2086
  peer torch $CASES >>"$OUT"
done
VERSIONS=$("$VENV/bin/python" -c 'import numpy, torch; print(f"numpy {numpy.__version__}, torch {torch.__version__}")')
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(date -u +%F) $START-$(date -u +%H:%M) UTC${ISA:+; limited to $ISA}${COPIES:+; operands cycled through $COPIES copies}"
echo "rustc $(rustc --version | cut -d' ' -f2); $VERSIONS; best of $ROUNDS interleaved rounds; 2 threads each"
echo
python3 - "$OUT" <<'PY'
import sys
best, order = {}, []
for line in open(sys.argv[1]):
    who, what, case, val = line.split()
    v = float(val)
    row = best.setdefault((what, case), {})
    if (what, case) not in order:
        order.append((what, case))
    prev = row.get(who)
    if prev is None or (v > prev if what == "matmul" else v < prev):
        row[who] = v
def kind(case):
    m, n, k = case.split(".")[0].split("x")
    return "square" if m == n == k else "step"
peers = ["numpy", "torch"]
print("| product (M x N x K . layouts of A, B) | kind | MLPL GFLOP/s | NumPy | torch.mm | MLPL speed ÷ fastest peer |")
print("|---|---|---:|---:|---:|---:|")
short = []
for what, case in order:
    r = best[(what, case)]
    cell = lambda w: f"{r[w]:.1f}" if w in r else "n/a"
    have = [w for w in peers if w in r]
    if what == "matmul":
        top = max(have, key=lambda w: r[w]) if have else None
        ratio = r["mlpl"] / r[top] if top else float("nan")
        if ratio < 0.95:
            short.append(case)
        print(f"| {case} | {kind(case)} | {cell('mlpl')} | {cell('numpy')} | {cell('torch')} | {ratio:.2f} ({top}) |")
    else:
        top = min(have, key=lambda w: r[w]) if have else None
        print(f"| tiny add, 4 elements (ns/call, lower is better) | overhead | {cell('mlpl')} | {cell('numpy')} | {cell('torch')} | {r[top] / r['mlpl']:.2f} ({top}) |")
print()
print(f"Below 0.95 of the fastest peer: {', '.join(short) if short else 'none'}")
PY
