#!/usr/bin/env bash
# Where the time of a training script goes: `mlpl run --profile` (the share of
# the run spent inside the kernels of replayed steps, timed in-process) and a
# `perf` sampling profile of all threads, samples classified by the function
# they were taken in. Needs `perf` (linux-tools); not part of CI.
#
# Usage: bash bench/train/profile.sh [SCRIPT]   (default: examples/tiny_lm.mlpl)
set -euo pipefail
cd "$(dirname "$0")/../.."
SCRIPT="${1:-examples/tiny_lm.mlpl}"
cargo build --release -q --bin mlpl
BIN=target/release/mlpl
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
echo "== mlpl run --profile $SCRIPT"
"$BIN" run --profile "$SCRIPT" >/dev/null
if ! command -v perf >/dev/null; then
  echo "perf is not installed: no sampling profile" >&2
  exit 0
fi
echo "== perf record -F 2000 (all threads)"
perf record -q -F 2000 -o "$WORK/perf.data" "$BIN" run "$SCRIPT" >/dev/null 2>&1
perf report -i "$WORK/perf.data" --no-children --sort sym --stdio -g none --percent-limit 0 2>/dev/null \
  | python3 -c '
import re, sys
cats = [
    ("kernels: matrix products (gemm)", lambda s: "gemm" in s),
    ("kernels: element-wise, norms, softmax, cross-entropy, Adam, layout", lambda s: "mlpl_devices::cpu" in s and "pool" not in s or re.search(r"call_mut|expf|logf|tanhf|sqrtf|powf", s)),
    ("memory copies and fills", lambda s: re.search(r"memmove|memcpy|memset", s)),
    ("thread pool (rayon, user space)", lambda s: "rayon" in s or "crossbeam" in s),
    ("operating system (thread wake-ups and yields, page faults)", lambda s: s.startswith("[k]")),
    ("allocator", lambda s: re.search(r"\bmi_|_mi_|malloc|free\b", s)),
    ("interpreter, autograd tape, capture", lambda s: "mlpl_lang" in s or "capture" in s),
]
total = {}
for line in sys.stdin:
    m = re.match(r"\s*([\d.]+)%\s+(\[.\])\s+(.*)", line)
    if not m:
        continue
    pct, kind, sym = float(m.group(1)), m.group(2), m.group(3)
    s = f"{kind} {sym}" if kind == "[k]" else sym
    name = next((n for n, f in cats if f(s)), "other")
    total[name] = total.get(name, 0) + pct
for name, pct in sorted(total.items(), key=lambda x: -x[1]):
    print(f"{pct:6.1f}%  {name}")
'
