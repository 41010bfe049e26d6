#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, integration, example
# snapshots, property tests). Used by the README's quick start and by CI.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
