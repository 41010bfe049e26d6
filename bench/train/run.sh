#!/usr/bin/env bash
# Training-step benchmark: MLPL vs PyTorch (eager, torch.compile), JAX (jit) and
# MLX (mx.compile, the Linux CPU wheel) on the same tiny transformer LM step
# (see tiny_lm.mlpl.in), at d = 32, 128, 256. Runs interleaved (one round = every
# framework once per d), reports the median ms/step per framework and d and the
# ratio to the fastest peer. Not part of CI. Installs the peers into
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
mlpl_ms() { # d -> ms/step from the time difference of a long and a short run
  local d=$1 short=5 long=$((5 + STEPS))
  sed "s/@D@/$d/; s/@STEPS@/$short/" bench/train/tiny_lm.mlpl.in >"$WORK/short.mlpl"
  sed "s/@D@/$d/; s/@STEPS@/$long/" bench/train/tiny_lm.mlpl.in >"$WORK/long.mlpl"
  local t0 t1 t2
  t0=$(date +%s.%N); "$BIN" run "$WORK/short.mlpl" >/dev/null
  t1=$(date +%s.%N); "$BIN" run "$WORK/long.mlpl" >/dev/null
  t2=$(date +%s.%N)
  python3 -c "print(round(((($t2-$t1)-($t1-$t0))*1e3)/$STEPS, 3))"
}
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for d in $DS; do
    echo "{\"impl\": \"mlpl\", \"d\": $d, \"ms_per_step\": $(mlpl_ms "$d")}" >>"$OUT"
    for impl in torch torch_compile jax mlx; do
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$VENV/bin/python" bench/train/peers.py "$impl" "$d" "$STEPS" >>"$OUT" 2>"$WORK/$impl.err" \
        || echo "{\"impl\": \"$impl\", \"d\": $d, \"error\": \"$(tail -1 "$WORK/$impl.err" | tr -d '"')\"}" >>"$OUT"
    done
  done
done
echo "machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $("$VENV/bin/python" -c 'import torch, jax, mlx.core as mx; print(f"torch {torch.__version__}, jax {jax.__version__}, mlx {mx.__version__}")' 2>/dev/null || echo 'peer versions unknown')"
python3 - "$OUT" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ds = sorted({r["d"] for r in rows})
impls = ["mlpl", "torch", "torch_compile", "jax", "mlx"]
print("| d | " + " | ".join(f"{i} ms/step" for i in impls) + " | MLPL / fastest peer |")
print("|---" * (len(impls) + 2) + "|")
for d in ds:
    med = {}
    for i in impls:
        v = [r["ms_per_step"] for r in rows if r["d"] == d and r["impl"] == i and "ms_per_step" in r]
        med[i] = statistics.median(v) if v else None
    peers = [med[i] for i in impls[1:] if med[i] is not None]
    ratio = f"{med['mlpl'] / min(peers):.2f}" if peers and med["mlpl"] else "n/a"
    cells = [f"{med[i]:.2f}" if med[i] is not None else "failed" for i in impls]
    print(f"| {d} | " + " | ".join(cells) + f" | {ratio} |")
errors = {(r["impl"], r["error"]) for r in rows if "error" in r}
for impl, e in sorted(errors):
    print(f"- {impl} failed: {e}")
PY
