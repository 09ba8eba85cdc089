#!/usr/bin/env bash
# README command 1: installs what is needed, builds in Release and runs Strata on the default
# model (models/strata-tiny: a tiny Llama config with random weights and a byte-level tokenizer,
# all in this repository). Pass a model directory or .gguf file to run another model.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
model=${1:-models/strata-tiny}
shift || true
load_format=()
[ "$model" = "models/strata-tiny" ] && load_format=(--load-format dummy)
exec build/strata generate "$model" "${load_format[@]}" --prompt "Once upon a time" \
  --max-tokens 64 --temperature 0 "$@"
