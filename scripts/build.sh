#!/usr/bin/env bash
# Configures and builds Strata in Release under build/ (the `strata` binary is build/strata).
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake -D options...]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
jobs=$(nproc)
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$dir" -j "$jobs"
