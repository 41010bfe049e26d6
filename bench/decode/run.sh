#!/usr/bin/env bash
# Decoding benchmark: loading a Hugging Face checkpoint and greedy generation
# with a key/value cache, MLPL's `generate(hf_model(DIR), prompt, n)` against
# transformers' `from_pretrained` and `generate` on PyTorch eager, 2 threads
# each. The checkpoints are written by transformers' save_pretrained with
# random weights in the shapes of released models (hf_peer.py's PRESETS:
# GPT-2 small and medium in float32; Llama 3.2 1B and Qwen 3 0.6B in
# bfloat16, as released; both load them as float32). Every new token is one
# row through every projection: the matrix-vector products of the GEMM
# (devices/src/cpu/gemm/vector.rs). Not part of CI.
#
# Per model, each implementation decodes 1 and 1 + NEW tokens after a
# PROMPT-token prompt, ROUNDS times each; the time per token is the difference
# of the best times over NEW, the time to the first token the best time of 1. MLPL's are timed inside one process per round
# (`experiment` blocks record their start times: the process start is outside
# them, the checkpoint's load is a span of its own). Peak memory: each
# process's peak RSS over its baseline (MLPL: an `mlpl run` of an empty
# script; PyTorch: after importing torch and transformers).
# Prints a Markdown table stamped with the CPU model, and whether both chose
# the same tokens (a random model's logits are close together, so float
# rounding may pick another token where two are nearly tied).
#
# Usage: bash bench/decode/run.sh [ROUNDS]
#   MODELS="gpt2-small qwen3-0.6b"  presets of hf_peer.py, or LAYERSxWIDTHxHEADS
#                        for a GPT-2 of that size (default: gpt2-small
#                        gpt2-medium qwen3-0.6b llama-3.2-1b)
#   PROMPT=16 NEW=32     prompt length and tokens timed
#   MLPL=path            the mlpl binary (default: built here, release)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS="${1:-3}"
MODELS="${MODELS:-${CONFIGS:-gpt2-small gpt2-medium qwen3-0.6b llama-3.2-1b}}"
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
PEER=(env -u OPENBLAS_CORETYPE OMP_NUM_THREADS=2 "$PY" bench/decode/hf_peer.py)
# Peak RSS (KiB) of a command, its output to stdout.
peak() { /usr/bin/time -f %M -o "$WORK/rss" "$@"; }
: >"$WORK/empty.mlpl"
peak "$MLPL" run "$WORK/empty.mlpl" >/dev/null
BASE_KB=$(cat "$WORK/rss")
START=$(date -u +%H:%M)
ROWS=""
for model in $MODELS; do
  dir="$WORK/$model"
  echo "$model: writing the checkpoint" >&2
  params=$("${PEER[@]}" make "$dir" "$model" 2>/dev/null | tail -1)
  vocab=$("$PY" -c "import json, sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$dir/config.json")
  ids=$("$PY" -c "print(', '.join(str(7 * i % $vocab) for i in range($PROMPT)))")
  # Timed inside the process: an experiment records its start time.
  {
    printf 'experiment "load" { m = hf_model("%s") }\nx = [%s]\n' "$model" "$ids"
    printf 'experiment "one" { a = generate(m, x, 1) }\n'
    printf 'experiment "many" { b = generate(m, x, %d) }\n' $((NEW + 1))
    printf 'experiment "end" { c = 0 }\nb\n'
  } >"$WORK/decode-$model.mlpl"
  spans="" rss=0
  for r in $(seq "$ROUNDS"); do
    echo "$model: round $r/$ROUNDS" >&2
    rm -rf "$WORK/exp"
    mlpl_tokens=$(cd "$WORK" && RAYON_NUM_THREADS=2 peak "$MLPL" run --exp-dir "$WORK/exp" "decode-$model.mlpl")
    rss=$(($(cat "$WORK/rss") > rss ? $(cat "$WORK/rss") : rss))
    spans+=$("$PY" - "$WORK/exp" <<'PYEOF'
import json, pathlib, sys
t = {p.parent.parent.name: json.loads(p.read_text())["timestamp_ns"] for p in pathlib.Path(sys.argv[1]).glob("*/*/run.json")}
print((t["one"] - t["load"]) / 1e9, (t["many"] - t["one"]) / 1e9, (t["end"] - t["many"]) / 1e9)
PYEOF
)$'\n'
  done
  load=$(printf '%s' "$spans" | sort -g -k1,1 | head -1 | cut -d' ' -f1)
  best1=$(printf '%s' "$spans" | sort -g -k2,2 | head -1 | cut -d' ' -f2)
  bestn=$(printf '%s' "$spans" | sort -g -k3,3 | head -1 | cut -d' ' -f3)
  mlpl_ms=$("$PY" -c "print(f'{($bestn - $best1) / $NEW * 1e3:.2f}')")
  mlpl_mb=$(((rss - BASE_KB) / 1024))
  torch=$("${PEER[@]}" decode "$dir" "$PROMPT" "$NEW" "$ROUNDS" 2>/dev/null | tail -1)
  ROWS+=$("$PY" - "$model" "$params" "$mlpl_ms" "$mlpl_tokens" "$load" "$mlpl_mb" "$best1" "$torch" <<'PYEOF'
import json, sys
model, params, mlpl_ms, mlpl_tokens, load, mlpl_mb, first, torch = sys.argv[1:]
mlpl_ms, load, first, torch = float(mlpl_ms), float(load), float(first), json.loads(torch)
t_ms = torch["ms_per_token"]
same = [int(float(x)) for x in mlpl_tokens.split()] == torch["tokens"]
print(f"| {model} | {int(params) / 1e6:.0f} M | {mlpl_ms:.2f} | {1e3 / mlpl_ms:.1f} | {t_ms:.2f} | {1e3 / t_ms:.1f} | {mlpl_ms / t_ms:.2f} | {'yes' if same else 'no'} | {first * 1e3:.1f} / {torch['prompt_ms']:.1f} | {load:.2f} / {torch['load_s']:.2f} | {mlpl_mb} / {torch['peak_mb']:.0f} |")
PYEOF
)$'\n'
  rm -rf "$dir"
done
VERSIONS=$("$PY" -c 'import torch, transformers; print(f"torch {torch.__version__}, transformers {transformers.__version__}")')
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); $(nproc) cores; $(date -u +%F) $START-$(date -u +%H:%M) UTC"
echo "$(rustc --version | cut -d' ' -f1-2); $VERSIONS; best of $ROUNDS rounds each; prompt $PROMPT tokens, $NEW timed; 2 threads each"
echo
echo "| model | parameters | MLPL ms/token | MLPL tokens/s | transformers (PyTorch eager) ms/token | tokens/s | MLPL ÷ PyTorch | same tokens | prompt + first token ms, MLPL / PyTorch | load s, MLPL / PyTorch | peak RSS over baseline MB, MLPL / PyTorch |"
echo "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
printf '%s' "$ROWS"
