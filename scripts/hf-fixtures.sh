#!/usr/bin/env bash
# Makes the tiny Hugging Face checkpoints under examples/hf/<family>/ and their
# reference JSON (logits, loss, gradients, one AdamW step, greedy generation),
# so `cargo test` compares against `transformers` with no Python.
#
# Installs CPU `torch` and `transformers` from PyPI into the gitignored local
# venv `.venv-hf` (a large download the first time), then runs
# scripts/hf_fixtures.py. Run it again after changing that script.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-hf
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python" -c 'import torch, transformers' 2>/dev/null; then
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        torch
    "$venv/bin/pip" install --quiet --disable-pip-version-check transformers safetensors
fi
"$venv/bin/python" scripts/hf_fixtures.py "$@"
