#!/usr/bin/env bash
# Builds and runs every test (README command 2; .ci/run calls exactly this).
#  1. Release build, all tests except those labelled `slow`.
#  2. ASan+UBSan build of the low-level unit suites (those marked SANITIZE in tests/*: core, io,
#     kernels, kv, sched, sampling, net), so memory errors fail CI. Every unit suite under the
#     sanitizers: STRATA_SANITIZE_ALL=ON scripts/test.sh (about 40 minutes more on 2 cores).
# Slow suites run on demand: ctest --test-dir build -L slow --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)

echo "== openai npm client for the e2e tests (tests/e2e)"
npm ci --prefix tests/e2e --no-audit --no-fund --loglevel=error

echo "== Release build"
scripts/build.sh build
echo "== Tests (Release, all but slow)"
ctest --test-dir build -LE slow --output-on-failure -j "$jobs" --timeout 900

echo "== Sanitizer build (ASan + UBSan) of the low-level unit suites"
# -O1 with line tables keeps the build quick while reports still name file:line.
cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" \
  -DSTRATA_SANITIZE=ON -DSTRATA_SANITIZE_ALL="${STRATA_SANITIZE_ALL:-OFF}" >/dev/null
cmake --build build-asan -j "$jobs" --target strata_unit_tests
echo "== Unit tests under sanitizers"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build-asan -L unit --output-on-failure -j "$jobs" --timeout 900
echo "== All tests passed"
