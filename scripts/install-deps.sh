#!/usr/bin/env bash
# Installs the Debian 12 packages Strata needs to build and test. Safe to re-run: it only calls
# apt-get when something is missing.
set -euo pipefail
# clang with its compiler-rt runtimes (libclang-rt-dev: ASan, UBSan, TSan and libFuzzer, which
# clang only recommends) builds the sanitizer and fuzzing stages of scripts/test.sh; llvm supplies
# llvm-symbolizer, which turns sanitizer stack traces into file:line. OpenMPI (mpirun and the
# headers) runs tensor and pipeline parallel ranks (src/dist/); iproute2 and curl drive its
# network-namespace test.
packages=(build-essential cmake ninja-build ccache pkg-config git libgtest-dev libgmock-dev
          libpcre2-dev nlohmann-json3-dev libxxhash-dev libicu-dev clang libclang-rt-dev llvm
          openmpi-bin libopenmpi-dev iproute2 curl python3)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
