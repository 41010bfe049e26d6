#!/usr/bin/env bash
# Training-step benchmark: MLPL vs PyTorch (eager with scaled_dot_product_attention,
# torch.compile), JAX (jit) and MLX (mx.compile, the Linux CPU wheel) on the same
# transformer LM step (lm.mlpl.in, peers.py), per configuration
# BLOCKSxHEADS-dD-TT-bB (blocks, heads, width d, window T, B windows a step).
# Runs interleaved (one round = every implementation once per configuration) and
# reports, per configuration, the median ms/step over the rounds, the ratio to
# the fastest peer (of the medians, and the median and range over rounds of
# the ratio within each round, which a machine whose speed drifts during the
# run moves less), the peak memory of each process above its RSS before the
# first step, and the GFLOP/s achieved; every table is stamped with the CPU
# model from lscpu. MLPL is measured captured (the default) and interpreted
# (--no-capture). Not part of CI. Installs the peers into bench/.venv-peers on
# first use (large: PyTorch pulls its CUDA libraries from PyPI).
#
# Usage: bash bench/train/run.sh [ROUNDS]
#   CONFIGS="..."   configurations (default: the tiny LM at d = 32, 128, 256 and
#                   4 blocks x 4 heads at (d, T) = (256, 256), (512, 256),
#                   (256, 1024), (512, 1024), 2048 tokens a step)
#   DS="32 128"     only the tiny LM, at these widths (when CONFIGS is unset)
#   IMPLS="mlpl torch jax"   implementations (default: all six)
#   STEPS=30        timed steps of 1-block models; BIG_STEPS=5 for the others
#   WARMUP=3        untimed steps of the peers first (default 3; 2 for BIG_STEPS < 10)
#   MLX_BIG_STEPS=2 timed steps of MLX on the multi-block models (after 1 warm-up)
#   RESULTS=FILE    also keep the raw results (one JSON line per run, in run order)
#   ISA=avx2        MLPL and PyTorch limited to AVX2 (an AVX2-only machine's code
#                   paths on an AVX-512 one): MLPL_CPU_ISA=avx2 (MLPL's GEMM and
#                   every vectorised kernel), PyTorch's ATen, oneDNN and MKL AVX2
#                   paths. JAX and MLX cannot be limited (JAX's products run in
#                   YNNPACK or Eigen, which pick AVX-512 at run time whatever
#                   --xla_cpu_max_isa says), so IMPLS defaults to the four
#                   others; named anyway, they run unlimited, as the header says
# Run time on a 2-core machine, estimated from the step times: about 4 minutes a
# round for the tiny LM (DS=...), 10-12 for everything, of which MLX's CPU
# backend takes about 5 on the large models (IMPLS without mlx to skip it).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
TINY=""
for d in ${DS:-32 128 256}; do TINY+=" 1x1-d$d-T32-b64"; done
LARGE="4x4-d256-T256-b8 4x4-d512-T256-b8 4x4-d256-T1024-b2 4x4-d512-T1024-b2"
if [ -n "${DS:-}" ]; then LARGE=""; fi
CONFIGS="${CONFIGS:-$TINY $LARGE}"
if [ -n "${ISA:-}" ]; then
  IMPLS="${IMPLS:-mlpl mlpl_eager torch torch_compile}"
else
  IMPLS="${IMPLS:-mlpl mlpl_eager torch torch_compile jax mlx}"
fi
STEPS="${STEPS:-30}"
BIG_STEPS="${BIG_STEPS:-5}"
MLX_BIG_STEPS="${MLX_BIG_STEPS:-2}"
VENV=bench/.venv-peers
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q torch jax "mlx[cpu]" numpy
fi
# shellcheck source=bench/isa.sh
. bench/isa.sh
# The peers: OpenBLAS left to detect the CPU itself, as it would for a user,
# unless ISA limits it; under ISA, the peers it cannot limit.
PEER_ENV=(env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "${ISA_LIMIT[@]}")
if [ -n "${ISA:-}" ]; then
  UNLIMITED=$(for i in $IMPLS; do case $i in jax | mlx) printf ' %s' "$i" ;; esac; done)
fi
cargo build --release -q --bin mlpl
BIN=target/release/mlpl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
OUT="$WORK/results.jsonl"
TEXT_BYTES=2028 # tiny_shakespeare_snippet, in byte tokens

# parse CONFIG: sets blocks heads d t b
parse() {
  [[ $1 =~ ^([0-9]+)x([0-9]+)-d([0-9]+)-T([0-9]+)-b([0-9]+)$ ]] \
    || { echo "config $1 is not BLOCKSxHEADS-dD-TT-bB" >&2; exit 2; }
  blocks=${BASH_REMATCH[1]} heads=${BASH_REMATCH[2]} d=${BASH_REMATCH[3]}
  t=${BASH_REMATCH[4]} b=${BASH_REMATCH[5]}
}
steps_of() { parse "$1"; if [ "$blocks" = 1 ]; then echo "$STEPS"; else echo "$BIG_STEPS"; fi; }

# script CONFIG STEPS FILE: the MLPL program of CONFIG (STEPS = 0: no train loop)
script() {
  parse "$1"
  local copies=0 len=$TEXT_BYTES
  while [ $((len / (t + 1))) -lt "$b" ]; do copies=$((copies + 1)); len=$((len * 2)); done
  local windows=$((len / (t + 1))) copy_lines="" block_lines="" i
  for ((i = 0; i < copies; i++)); do copy_lines+="ids = concat(ids, ids, 0)\n"; done
  for ((i = 0; i < blocks; i++)); do
    local s=$((10 + 10 * i))
    block_lines+="  residual(chain(rms_norm(d), causal_attention(d, $heads, $s))),\n"
    block_lines+="  residual(chain(rms_norm(d), linear(d, 4 * d, $((s + 4))), relu_layer(), linear(4 * d, d, $((s + 5))))),\n"
  done
  sed -e "s/@D@/$d/g; s/@T@/$t/g; s/@B@/$b/g" \
    -e "s/@STEPS@/$2/g; s/@WINDOWS@/$windows/g" \
    -e "s|^@COPY_LINES@$|${copy_lines%\\n}|; s|^@BLOCK_LINES@$|${block_lines%\\n}|" \
    bench/train/lm.mlpl.in >"$3"
  if [ "$2" = 0 ]; then sed -i '/^train /,/^}/d' "$3"; fi
}

# mlpl_run CONFIG [--no-capture] -> one JSON line. ms/step: captured, the median of
# the replayed steps (STEPS + 3 of them, after 2 recorded ones), as the peers
# report the median of their timed steps; interpreted, the loop's wall time over
# its steps (a mean, first steps included). peak_mb: the run's peak RSS minus
# that of the same program without its train loop (model and data made).
mlpl_run() {
  local config=$1 mode=${2:-} impl=mlpl steps
  [ -n "$mode" ] && impl=mlpl_eager
  steps=$(($(steps_of "$config") + 5))
  script "$config" "$steps" "$WORK/b.mlpl"
  script "$config" 0 "$WORK/base.mlpl"
  "$BIN" run --profile $mode "$WORK/b.mlpl" 2>"$WORK/profile.txt" >/dev/null
  "$BIN" run --profile "$WORK/base.mlpl" 2>"$WORK/base.txt" >/dev/null
  python3 - "$WORK/profile.txt" "$WORK/base.txt" "$impl" "$config" <<'PY'
import json, re, sys
t, base = open(sys.argv[1]).read(), open(sys.argv[2]).read()
m = re.search(r"replayed from the captured step \(\w+\) in [\d.]+ ms, [\d.]+ ms each \(median ([\d.]+) ms\)", t)
if m:
    ms = float(m.group(1))
else:
    m = re.search(r"(\d+) iterations in ([\d.]+) ms", t)
    ms = round(float(m.group(2)) / int(m.group(1)), 3)
peak = lambda s: float(re.search(r"peak RSS: ([\d.]+) bytes", s).group(1))
print(json.dumps({"impl": sys.argv[3], "config": sys.argv[4], "ms_per_step": ms,
                  "peak_mb": round((peak(t) - peak(base)) / 2**20, 1)}))
PY
}

# The machine's GEMM peak: MLPL's GEMM (all threads) on square f32 products of
# 64..1024, the best size.
cargo build --release -q -p mlpl-devices --example bench_gemm
PEAK=$(target/release/examples/bench_gemm | awk '$2 == "matmul" && $4 > p {p = $4} END {print p}')
START=$(date -u +%H:%M)
for r in $(seq "$ROUNDS"); do
  echo "round $r/$ROUNDS" >&2
  for config in $CONFIGS; do
    steps=$(steps_of "$config")
    parse "$config" # blocks, heads, d, t, b of this configuration
    warmup=${WARMUP:-3}
    [ -z "${WARMUP:-}" ] && [ "$steps" -lt 10 ] && warmup=2
    for impl in $IMPLS; do
      echo "  $config $impl" >&2
      n=$steps w=$warmup
      # MLX's CPU backend takes tens of seconds a step on the large models.
      if [ "$impl" = mlx ] && [ "$blocks" != 1 ]; then
        n=$MLX_BIG_STEPS w=1
      fi
      case $impl in
        # A failing run becomes an error row; the other results are kept.
        mlpl) mlpl_run "$config" >>"$OUT" \
          || echo "{\"impl\": \"mlpl\", \"config\": \"$config\", \"error\": \"mlpl run failed: $(tail -1 "$WORK/profile.txt" | tr -d '"\\')\"}" >>"$OUT" ;;
        mlpl_eager) mlpl_run "$config" --no-capture >>"$OUT" \
          || echo "{\"impl\": \"mlpl_eager\", \"config\": \"$config\", \"error\": \"mlpl run failed: $(tail -1 "$WORK/profile.txt" | tr -d '"\\')\"}" >>"$OUT" ;;
        *) "${PEER_ENV[@]}" "$VENV/bin/python" bench/train/peers.py "$impl" "$config" "$n" "$w" >>"$OUT" 2>"$WORK/$impl.err" \
          || echo "{\"impl\": \"$impl\", \"config\": \"$config\", \"error\": \"$(tail -1 "$WORK/$impl.err" | tr -d '"\\')\"}" >>"$OUT" ;;
      esac
    done
  done
done
if [ -n "${RESULTS:-}" ]; then cp "$OUT" "$RESULTS"; fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(date -u +%F) $START-$(date -u +%H:%M) UTC; $ROUNDS rounds${ISA:+; MLPL and PyTorch limited to $ISA}${UNLIMITED:+ (not limited:$UNLIMITED)}"
echo "$("$VENV/bin/python" -c 'import torch, jax, mlx.core as mx; print(f"torch {torch.__version__}, jax {jax.__version__}, mlx {mx.__version__}")' 2>/dev/null || echo 'peer versions unknown'); GEMM peak (MLPL's GEMM, square f32, best of n = 64..1024): $PEAK GFLOP/s"
python3 - "$OUT" "$PEAK" "$IMPLS" <<'PY'
import json, re, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peak = float(sys.argv[2] or "nan")
impls = sys.argv[3].split()
peers = [i for i in impls if not i.startswith("mlpl")]
configs = list(dict.fromkeys(r["config"] for r in rows))
V = 280
def flops(config):
    # Matrix-product FLOPs of one training step: 3 x the forward's (per block: q,
    # k, v, o projections 8Nd^2, MLP 16Nd^2, scores and weighted values 4BT^2d,
    # the whole T x T counted; logits 2NdV; N = B*T tokens).
    L, H, d, T, B = (int(g) for g in re.fullmatch(r"(\d+)x(\d+)-d(\d+)-T(\d+)-b(\d+)", config).groups())
    n = B * T
    return 3 * (L * (24 * n * d * d + 4 * B * T * T * d) + 2 * n * d * V)
def median(config, impl, key):
    v = [r[key] for r in rows if r["config"] == config and r["impl"] == impl and key in r]
    return statistics.median(v) if v else None
# The n-th result of an (impl, config) pair is from round n.
seen = {}
for r in rows:
    key = (r["impl"], r["config"])
    r["round"] = seen[key] = seen.get(key, 0) + 1
def paired(config):
    """Median (min, max) over rounds of MLPL's time over the fastest peer's in
    the same round: a machine whose speed drifts during the run moves both."""
    per = {}
    for r in rows:
        if r["config"] == config and "ms_per_step" in r:
            per.setdefault(r["round"], {})[r["impl"]] = r["ms_per_step"]
    ratios = [t["mlpl"] / min(t[p] for p in peers if p in t) for t in per.values()
              if "mlpl" in t and any(p in t for p in peers)]
    if not ratios:
        return "n/a"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}–{max(ratios):.2f})"
def table(title, key, fmt, ratio):
    print(f"\n{title}\n")
    print("| config | " + " | ".join(impls) + (" | MLPL ÷ fastest peer | same round, median (range) |" if ratio else " |"))
    print("|---" * (len(impls) + 1 + 2 * bool(ratio)) + "|")
    for c in configs:
        med = {i: median(c, i, key) for i in impls}
        cells = [fmt(med[i]) if med[i] is not None else "failed" for i in impls]
        line = f"| {c} | " + " | ".join(cells)
        if ratio:
            pm = {i: med[i] for i in peers if med[i] is not None}
            best = min(pm, key=pm.get) if pm else None
            line += f" | {med['mlpl'] / pm[best]:.2f} ({best})" if best and med.get("mlpl") else " | n/a"
            line += f" | {paired(c)}"
        print(line + " |")
table("Median ms/step (config: BLOCKSxHEADS-dD-TT-bB):", "ms_per_step", lambda v: f"{v:.2f}", True)
table("Peak memory above the RSS before the first step, MiB (median over rounds):", "peak_mb", lambda v: f"{v:.0f}", False)
print(f"\nAchieved GFLOP/s (matrix-product FLOPs per step / median step time; share of the GEMM peak {peak:.0f}):\n")
print("| config | MFLOP/step | " + " | ".join(impls) + " |")
print("|---" * (len(impls) + 2) + "|")
for c in configs:
    cells = []
    for i in impls:
        m = median(c, i, "ms_per_step")
        g = flops(c) / (m * 1e-3) / 1e9 if m else None
        cells.append(f"{g:.1f} ({100 * g / peak:.0f}%)" if g else "n/a")
    print(f"| {c} | {flops(c) / 1e6:.0f} | " + " | ".join(cells) + " |")
for impl, config, e in sorted({(r["impl"], r["config"], r["error"]) for r in rows if "error" in r}):
    print(f"- {impl} failed on {config}: {e}")
PY
