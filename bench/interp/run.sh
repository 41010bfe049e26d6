#!/usr/bin/env bash
# Interpreter overhead per operation: MLPL vs numpy on the same loops, run
# interleaved (MLPL round, numpy round, ...) and summarised as medians.
# Installs numpy into bench/.venv on first use. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${ROUNDS:-5}
if [ ! -x bench/.venv/bin/python ]; then
  python3 -m venv bench/.venv
  bench/.venv/bin/pip install --quiet numpy
fi
cargo build --release -p mlpl-lang --bench interp --quiet
BIN=$(ls -t target/release/deps/interp-* | grep -v '\.d$' | head -1)
out=$(mktemp)
for _ in $(seq "$ROUNDS"); do
  "$BIN" --rounds 1 >>"$out"
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE bench/.venv/bin/python bench/interp/numpy_overhead.py --rounds 1 >>"$out"
done
bench/.venv/bin/python - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
cases = list(dict.fromkeys(r["case"] for r in rows))
print("| case | MLPL ns/iter | numpy ns/iter | MLPL / numpy |")
print("|---|---:|---:|---:|")
for c in cases:
    m = statistics.median(r["ns_per_iter"] for r in rows if r["case"] == c and r["impl"] == "mlpl")
    n = statistics.median(r["ns_per_iter"] for r in rows if r["case"] == c and r["impl"] == "numpy")
    print(f"| {c} | {m:.0f} | {n:.0f} | {m / n:.2f} |")
PY
