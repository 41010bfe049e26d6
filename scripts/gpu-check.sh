#!/usr/bin/env bash
# The CUDA checks that need a GPU, as one prepared script in two steps:
#
#   bash scripts/gpu-check.sh build   # on a build machine (x86-64 Linux, Rust):
#                                     # release binaries with the CUDA backend,
#                                     # stripped, into target/gpu-check/
#   bash scripts/gpu-check.sh run     # on the GPU machine (needs only the NVIDIA
#                                     # driver, cuBLAS and NVRTC; no Rust, no network):
#                                     # the parity tests, then the benchmark table
#
# Carry target/gpu-check/ (about 30 MB) to the GPU machine together with the
# repository's examples/ and bench/train/ (the tests and the benchmark read them).
#
# `run` looks for libcublas / libnvrtc in LD_LIBRARY_PATH, the CUDA toolkit
# (/usr/local/cuda*) and the `nvidia-*-cu12` wheels of any Python on the machine
# (PyTorch installs them), then:
#   1. the op parity tests (every Backend op, forward and backward, vs the CPU;
#      residency, exact counters, fallbacks, out-of-memory) and the training parity
#      tests (tiny_mlp and tiny LM loss curves, parameters resident), with
#      MLPL_REQUIRE_GPU=1 so that a missing GPU fails instead of skipping;
#   2. the tiny-LM training step of bench/train at d = 128, 256, 512, 1024 on CUDA
#      and on the CPU (interleaved rounds; ms/step from a long minus a short run, so
#      start-up and kernel compilation cancel), plus PyTorch eager on the same GPU
#      when `python3 -c 'import torch'` works there; prints a Markdown table with
#      the GPU model, medians and ratios, ready for docs/benchmarks.md.
#
# Environment: ROUNDS (default 3), STEPS (default 20), DS (default "128 256 512 1024"),
# CPU_DS (widths also timed on the CPU, default "128 256 512").
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=target/gpu-check

build() {
  local tdir=target/gpu-check-build
  export CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_STRIP=symbols
  cargo build --release --locked --features mlpl-devices/cuda --bin mlpl --target-dir "$tdir"
  local tests
  tests=$(cargo test --release --locked --features mlpl-devices/cuda --target-dir "$tdir" \
    -p mlpl-devices --test devices -p mlpl-lang --test lang --no-run \
    --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["target"]["name"], m["executable"])')
  rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
  cp "$tdir/release/mlpl" "$BUNDLE/mlpl"
  while read -r name exe; do cp "$exe" "$BUNDLE/$name"; done <<<"$tests"
  for t in devices lang; do
    [ -x "$BUNDLE/$t" ] || { echo "gpu-check: test binary $t was not built" >&2; exit 1; }
  done
  du -sh "$BUNDLE"
}

find_cuda_libs() {
  local dirs=() d
  for d in /usr/local/cuda/lib64 /usr/local/cuda-*/lib64 /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && dirs+=("$d")
  done
  for py in python3 /usr/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    while read -r d; do [ -n "$d" ] && dirs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import glob, site, sys
roots = site.getsitepackages() + [site.getusersitepackages()] + sys.path
for r in dict.fromkeys(roots):
    for d in glob.glob(f"{r}/nvidia/*/lib"):
        print(d)
PY
)
  done
  local path=""
  for d in "${dirs[@]}"; do
    if compgen -G "$d/libcublas.so*" >/dev/null || compgen -G "$d/libnvrtc.so*" >/dev/null ||
      compgen -G "$d/libcublasLt.so*" >/dev/null; then
      path="$path:$d"
    fi
  done
  echo "${path#:}"
}

median_ms() { python3 -c 'import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f"{statistics.median(v):.2f}" if v else "n/a")' "$@"; }

mlpl_ms() { # device d -> ms/step (long run minus short run)
  local dev=$1 d=$2 short=3 long=$((3 + STEPS)) t0 t1 t2
  sed "s/@D@/$d/; s/@STEPS@/$short/" bench/train/tiny_lm.mlpl.in >"$WORK/short.mlpl"
  sed "s/@D@/$d/; s/@STEPS@/$long/" bench/train/tiny_lm.mlpl.in >"$WORK/long.mlpl"
  t0=$(date +%s.%N); "$BUNDLE/mlpl" run "$WORK/short.mlpl" --device "$dev" >/dev/null
  t1=$(date +%s.%N); "$BUNDLE/mlpl" run "$WORK/long.mlpl" --device "$dev" >/dev/null
  t2=$(date +%s.%N)
  python3 -c "print(round(((($t2-$t1)-($t1-$t0))*1e3)/$STEPS, 3))"
}

torch_ms() { # d -> ms/step of PyTorch eager on the GPU, or nothing
  python3 - "$1" "$STEPS" <<'PY' 2>/dev/null || true
import statistics, sys, time
import torch
import torch.nn.functional as F
if not torch.cuda.is_available():
    sys.exit(1)
d, steps = int(sys.argv[1]), int(sys.argv[2])
V, T, B = 280, 32, 64
dev = "cuda"
torch.manual_seed(0)
class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(V, d)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d, bias=False) for _ in range(4))
        self.up, self.down, self.head = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d), torch.nn.Linear(d, V)
        self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), 1))
    def norm(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-8)
    def forward(self, x):
        h = self.emb(x)
        a = self.norm(h)
        s = (self.q(a) @ self.k(a).transpose(-1, -2) / d ** 0.5).masked_fill(self.mask, -1e9)
        h = h + self.o(torch.softmax(s, -1) @ self.v(a))
        h = h + self.down(torch.relu(self.up(self.norm(h))))
        return self.head(self.norm(h))
model = Model().to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x = torch.randint(0, 256, (B, T), device=dev)
y = torch.randint(0, 256, (B, T), device=dev)
def step():
    opt.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
    loss.backward()
    opt.step()
    loss.item()  # one loss to the host per step, as MLPL's telemetry reads it
for _ in range(3):
    step()
torch.cuda.synchronize()
times = []
for _ in range(steps):
    t0 = time.perf_counter(); step(); torch.cuda.synchronize()
    times.append((time.perf_counter() - t0) * 1e3)
print(round(statistics.median(times), 3))
PY
}

run() {
  for t in mlpl devices lang; do
    [ -x "$BUNDLE/$t" ] || { echo "gpu-check: $BUNDLE/$t is missing: run 'bash scripts/gpu-check.sh build' on a build machine first" >&2; exit 1; }
  done
  local libs
  libs=$(find_cuda_libs)
  export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export MLPL_REQUIRE_GPU=1 MLPL_REPO_ROOT="$PWD"
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  echo "== GPU"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "(nvidia-smi not found)"
  echo "CUDA library directories: ${libs:-none found}"
  echo "== parity tests"
  local rc=0
  # The CUDA modules of the two crates' test binaries (cuda_parity,
  # cuda_fused_parity, cuda_kernels_compile; cuda_training).
  "$BUNDLE/devices" cuda_ --test-threads=4 || rc=1
  "$BUNDLE/lang" cuda_training:: --test-threads=1 --nocapture || rc=1
  local why
  why=$(echo '1' >"$WORK/probe.mlpl" && "$BUNDLE/mlpl" run "$WORK/probe.mlpl" --device cuda 2>&1 >/dev/null | grep "not available" || true)
  if [ -n "$why" ]; then
    echo "gpu-check: no benchmark, CUDA does not run here: $why" >&2
    return 1
  fi
  echo "== benchmark: tiny-LM training step (bench/train), ms/step, median of ${ROUNDS} rounds, ${STEPS} steps"
  declare -A cuda cpu torch
  for r in $(seq "$ROUNDS"); do
    for d in $DS; do
      cuda[$d]="${cuda[$d]:-} $(mlpl_ms cuda "$d")"
      if [[ " $CPU_DS " == *" $d "* ]]; then cpu[$d]="${cpu[$d]:-} $(mlpl_ms cpu "$d")"; fi
      torch[$d]="${torch[$d]:-} $(torch_ms "$d")"
    done
  done
  echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1); CPU: $(nproc) cores"
  echo "| d | MLPL CUDA | MLPL CPU | PyTorch eager (CUDA) | CUDA / PyTorch | CPU / CUDA |"
  echo "|---|---|---|---|---|---|"
  for d in $DS; do
    local g c t
    g=$(median_ms ${cuda[$d]}); c=$(median_ms ${cpu[$d]:-}); t=$(median_ms ${torch[$d]})
    python3 -c 'import sys
d, g, c, t = sys.argv[1:]
f = lambda x: None if x == "n/a" else float(x)
ratio = lambda a, b: f"{f(a) / f(b):.2f}" if f(a) and f(b) else "n/a"
print(f"| {d} | {g} | {c} | {t} | {ratio(g, t)} | {ratio(c, g)} |")' "$d" "$g" "$c" "$t"
  done
  echo "(CPU / CUDA > 1: CUDA is faster; the crossover is the smallest d where it is.)"
  return $rc
}

ROUNDS="${ROUNDS:-3}"
STEPS="${STEPS:-20}"
DS="${DS:-128 256 512 1024}"
CPU_DS="${CPU_DS:-128 256 512}"
case "${1:-}" in
  build) build ;;
  run) run ;;
  *) echo "usage: bash scripts/gpu-check.sh build|run" >&2; exit 2 ;;
esac
