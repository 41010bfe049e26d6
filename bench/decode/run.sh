#!/usr/bin/env bash
# Decoding benchmark: greedy generation with a key/value cache of a randomly
# initialised GPT-2 checkpoint (written by transformers' save_pretrained, tied
# head, vocabulary 50257), MLPL's `generate(hf_model(DIR), prompt, n)` against
# transformers' `generate` on PyTorch eager, 2 threads each. Every new token
# is one row through every projection: the matrix-vector products of the
# GEMM (devices/src/cpu/gemm/vector.rs). Not part of CI.
#
# Per configuration, each implementation decodes 1 and 1 + NEW tokens after a
# PROMPT-token prompt, ROUNDS times each; the time per token is the difference
# of the best times over NEW. MLPL's are timed inside one process per round
# (`experiment` blocks record their start times: the process start and the
# checkpoint's load are outside them).
# Prints a Markdown table stamped with the CPU model, and whether both chose
# the same tokens (a random model's logits are close together, so float
# rounding may pick another token where two are nearly tied).
#
# Usage: bash bench/decode/run.sh [ROUNDS]
#   CONFIGS="12x768x12"  LAYERSxWIDTHxHEADS (default: GPT-2 small, 124 M
#                        parameters, and 24x1024x16, GPT-2 medium, 355 M)
#   PROMPT=16 NEW=32     prompt length and tokens timed
#   MLPL=path            the mlpl binary (default: built here, release)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
CONFIGS="${CONFIGS:-12x768x12 24x1024x16}"
PROMPT="${PROMPT:-16}"
NEW="${NEW:-32}"
VENV=bench/.venv-peers
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
if ! "$VENV/bin/python" -c 'import torch, transformers, safetensors' 2>/dev/null; then
  "$VENV/bin/pip" install -q torch transformers safetensors
fi
if [ -z "${MLPL:-}" ]; then
  cargo build --release -q --bin mlpl
  MLPL=target/release/mlpl
fi
MLPL=$(realpath "$MLPL")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
PY="$VENV/bin/python"
PEER=(env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=2 "$PY" bench/decode/gpt2_peer.py)
START=$(date -u +%H:%M)
ROWS=""
for cfg in $CONFIGS; do
  [[ $cfg =~ ^([0-9]+)x([0-9]+)x([0-9]+)$ ]] || { echo "config $cfg is not LAYERSxWIDTHxHEADS" >&2; exit 2; }
  layers=${BASH_REMATCH[1]} width=${BASH_REMATCH[2]} heads=${BASH_REMATCH[3]}
  dir="$WORK/gpt2-$cfg"
  echo "config $cfg: writing the checkpoint" >&2
  "${PEER[@]}" make "$dir" "$layers" "$width" "$heads" 50257 2>/dev/null
  ids=$("$PY" -c "print(', '.join(str(7 * i % 50257) for i in range($PROMPT)))")
  # Timed inside the process: an experiment records its start time, so the
  # checkpoint's load is outside both spans.
  printf 'm = hf_model("gpt2-%s")\nx = [%s]\n' "$cfg" "$ids" >"$WORK/decode-$cfg.mlpl"
  printf 'experiment "one" { a = generate(m, x, 1) }\n' >>"$WORK/decode-$cfg.mlpl"
  printf 'experiment "many" { b = generate(m, x, %d) }\n' $((NEW + 1)) >>"$WORK/decode-$cfg.mlpl"
  printf 'experiment "end" { c = 0 }\nb\n' >>"$WORK/decode-$cfg.mlpl"
  spans=""
  for r in $(seq "$ROUNDS"); do
    echo "config $cfg: round $r/$ROUNDS" >&2
    rm -rf "$WORK/exp"
    mlpl_tokens=$(RAYON_NUM_THREADS=2 "$MLPL" run --exp-dir "$WORK/exp" "$WORK/decode-$cfg.mlpl")
    spans+=$("$PY" - "$WORK/exp" <<'PYEOF'
import json, pathlib, sys
t = {p.parent.parent.name: json.loads(p.read_text())["timestamp_ns"] for p in pathlib.Path(sys.argv[1]).glob("*/*/run.json")}
print((t["many"] - t["one"]) / 1e9, (t["end"] - t["many"]) / 1e9)
PYEOF
)$'\n'
  done
  best1=$(printf '%s' "$spans" | sort -g -k1,1 | head -1 | cut -d' ' -f1)
  bestn=$(printf '%s' "$spans" | sort -g -k2,2 | head -1 | cut -d' ' -f2)
  mlpl_ms=$("$PY" -c "print(f'{($bestn - $best1) / $NEW * 1e3:.2f}')")
  torch=$("${PEER[@]}" decode "$dir" "$PROMPT" "$NEW" "$ROUNDS" 2>/dev/null | tail -1)
  ROWS+=$("$PY" - "$cfg" "$mlpl_ms" "$mlpl_tokens" "$torch" <<'PYEOF'
import json, sys
cfg, mlpl_ms, mlpl_tokens, torch = sys.argv[1], float(sys.argv[2]), sys.argv[3].split(), json.loads(sys.argv[4])
t_ms = torch["ms_per_token"]
same = [int(float(x)) for x in mlpl_tokens] == torch["tokens"]
print(f"| {cfg} | {mlpl_ms:.2f} | {1e3 / mlpl_ms:.1f} | {t_ms:.2f} | {1e3 / t_ms:.1f} | {mlpl_ms / t_ms:.2f} | {'yes' if same else 'no'} |")
PYEOF
)$'\n'
done
VERSIONS=$("$PY" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(date -u +%F) $START-$(date -u +%H:%M) UTC"
echo "$(rustc --version | cut -d' ' -f1-2); $VERSIONS; best of $ROUNDS rounds each; prompt $PROMPT tokens, $NEW timed; 2 threads each"
echo
echo "| GPT-2 (layers x width x heads) | MLPL ms/token | MLPL tokens/s | transformers (PyTorch eager) ms/token | tokens/s | MLPL ÷ PyTorch | same tokens |"
echo "|---|---:|---:|---:|---:|---:|---|"
printf '%s' "$ROWS"
