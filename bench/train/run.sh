#!/usr/bin/env bash
# Training-step benchmark: MLPL vs PyTorch (eager, torch.compile), JAX (jit) and
# MLX (mx.compile, the Linux CPU wheel) on the same tiny transformer LM step
# (see tiny_lm.mlpl.in), at d = 32, 128, 256. Runs interleaved (one round = every
# framework once per d), reports the median ms/step per framework and d and the
# ratio to the fastest peer, the GFLOP/s each achieves and the machine's GEMM
# peak. MLPL is measured captured (the default) and interpreted (--no-capture).
# Not part of CI. Installs the peers into
# bench/.venv-peers on first use (large: PyTorch pulls its CUDA libraries from PyPI).
#
# Usage: bash bench/train/run.sh [ROUNDS]   (set DS="32 128" to limit widths)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
DS="${DS:-32 128 256}"
STEPS="${STEPS:-30}"
VENV=bench/.venv-peers
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q torch jax "mlx[cpu]" numpy
fi
cargo build --release -q --bin mlpl
BIN=target/release/mlpl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT="$WORK/results.jsonl"
mlpl_ms() { # d [--no-capture] -> ms/step of the steady state, from `mlpl run --profile`:
  # captured, the median of the replayed steps (STEPS + 3 of them, after 2 recorded
  # ones), as the peers report the median of their timed steps; interpreted, the
  # loop's wall time over its steps (a mean, first steps included).
  local d=$1 mode=${2:-} steps=$((STEPS + 5))
  sed "s/@D@/$d/; s/@STEPS@/$steps/" bench/train/tiny_lm.mlpl.in >"$WORK/b.mlpl"
  "$BIN" run --profile $mode "$WORK/b.mlpl" 2>"$WORK/profile.txt" >/dev/null
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
# The machine's GEMM peak: MLPL's GEMM (the `gemm` crate, all threads) on square
# f32 products of 64..1024, the best size.
cargo build --release -q -p mlpl-devices --example bench_gemm
PEAK=$(target/release/examples/bench_gemm | awk '$2 == "matmul" && $4 > p {p = $4} END {print p}')
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for d in $DS; do
    echo "{\"impl\": \"mlpl\", \"d\": $d, \"ms_per_step\": $(mlpl_ms "$d")}" >>"$OUT"
    echo "{\"impl\": \"mlpl_eager\", \"d\": $d, \"ms_per_step\": $(mlpl_ms "$d" --no-capture)}" >>"$OUT"
    for impl in torch torch_compile jax mlx; do
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$VENV/bin/python" bench/train/peers.py "$impl" "$d" "$STEPS" >>"$OUT" 2>"$WORK/$impl.err" \
        || echo "{\"impl\": \"$impl\", \"d\": $d, \"error\": \"$(tail -1 "$WORK/$impl.err" | tr -d '"')\"}" >>"$OUT"
    done
  done
done
echo "GEMM peak (MLPL's GEMM, square f32, best of n = 64..1024): $PEAK GFLOP/s"
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $("$VENV/bin/python" -c 'import torch, jax, mlx.core as mx; print(f"torch {torch.__version__}, jax {jax.__version__}, mlx {mx.__version__}")' 2>/dev/null || echo 'peer versions unknown')"
python3 - "$OUT" "$PEAK" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peak = float(sys.argv[2] or "nan")
ds = sorted({r["d"] for r in rows})
impls = ["mlpl", "mlpl_eager", "torch", "torch_compile", "jax", "mlx"]
peers = ["torch", "torch_compile", "jax", "mlx"]
V, T, B = 280, 32, 64
def flops(d):
    # Matrix-product FLOPs of one training step: 3 x the forward's (q, k, v, o
    # projections 8Nd^2, MLP 16Nd^2, scores and weighted values 4BT^2d, logits
    # 2NdV, N = B*T tokens); backward is about twice the forward.
    n = B * T
    return 3 * (24 * n * d * d + 4 * B * T * T * d + 2 * n * d * V)
print("| d | " + " | ".join(f"{i} ms/step" for i in impls) + " | MLPL / fastest peer |")
print("|---" * (len(impls) + 2) + "|")
gf = []
for d in ds:
    med = {}
    for i in impls:
        v = [r["ms_per_step"] for r in rows if r["d"] == d and r["impl"] == i and "ms_per_step" in r]
        med[i] = statistics.median(v) if v else None
    pm = [med[i] for i in peers if med[i] is not None]
    ratio = f"{med['mlpl'] / min(pm):.2f}" if pm and med["mlpl"] else "n/a"
    cells = [f"{med[i]:.2f}" if med[i] is not None else "failed" for i in impls]
    print(f"| {d} | " + " | ".join(cells) + f" | {ratio} |")
    gf.append((d, {i: flops(d) / (med[i] * 1e-3) / 1e9 for i in impls if med[i]}))
print()
print(f"Achieved GFLOP/s (matrix-product FLOPs per step / median step time; GEMM peak {peak:.0f}):")
print()
print("| d | MFLOP/step | " + " | ".join(impls) + " |")
print("|---" * (len(impls) + 2) + "|")
for d, g in gf:
    cells = [f"{g[i]:.1f} ({100 * g[i] / peak:.0f}%)" if i in g else "n/a" for i in impls]
    print(f"| {d} | {flops(d) / 1e6:.0f} | " + " | ".join(cells) + " |")
errors = {(r["impl"], r["error"]) for r in rows if "error" in r}
for impl, e in sorted(errors):
    print(f"- {impl} failed: {e}")
PY
