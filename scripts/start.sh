#!/usr/bin/env bash
# README command 1: installs what is needed, builds in Release and serves the default model
# (models/strata-tiny: a tiny Llama config with random weights and a byte-level tokenizer, all in
# this repository) over the OpenAI API on port 8000. Pass a model directory or .gguf file to serve
# another model; further arguments go to `strata serve` (e.g. --port 9000 --host 127.0.0.1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
model=models/strata-tiny
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  model=$1
  shift
fi
extra=()
if [ "$model" = "models/strata-tiny" ]; then
  extra=(--load-format dummy --kv-cache-memory 256MiB)
fi
exec build/strata serve "$model" "${extra[@]}" "$@"
