#!/usr/bin/env bash
# Builds and runs every test (README command 2; .ci/run calls exactly this). Stages:
#  1. Dependencies: Debian packages (scripts/install-deps.sh) and the npm packages (openai, ai, zod,
#     ajv) that the
#     e2e tests drive (tests/e2e).
#  2. Release build (GCC) in build/, then every test except those labelled `slow`.
#  3. Sanitizer build (clang, ASan + UBSan, -O1 with line tables) in build-asan/: every suite and
#     the libFuzzer targets. Then the same tests as stage 2 under the sanitizers.
#  4. Fuzzing: each target of tests/fuzz for $STRATA_FUZZ_SECONDS seconds (default 30) under ASan +
#     UBSan, from the seed corpus and what earlier runs found (scripts/fuzz.sh).
#  5. ThreadSanitizer build (clang) in build-tsan/ of the unit suites, and a run of them: the
#     thread pool, event loop and HTTP server, engine, executor workers and server over HTTP are
#     the concurrent ones, and the kernels and sampler run on the thread pool.
# A failing test stage does not stop the later ones (a failure under one build is worth seeing
# under the others too); the script ends with each stage's time and result, and fails if any
# stage did. Build failures stop it at once. Slow suites run on demand:
#   ctest --test-dir build -L slow --output-on-failure
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
fuzz_seconds=${STRATA_FUZZ_SECONDS:-30}
# -O1 with line tables keeps the sanitizer builds quick while reports still name file:line.
sanitizer_flags=(-G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug
                 "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only")
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

summary=()
failed=()
stage_start=0
begin() {
  echo
  echo "== $1"
  stage_start=$SECONDS
}
# end NAME STATUS: records the stage's wall time and result.
end() {
  local took=$((SECONDS - stage_start))
  summary+=("$(printf '%-44s %4d:%02d  %s' "$1" $((took / 60)) $((took % 60)) "$2")")
  if [ "$2" != ok ]; then failed+=("$1"); fi
}
# check NAME CMD...: runs a test stage, recording a failure instead of stopping.
check() {
  local name=$1
  shift
  if "$@"; then end "$name" ok; else end "$name" FAILED; fi
}

begin "1. Dependencies (apt packages, the e2e npm packages)"
scripts/install-deps.sh
npm ci --prefix tests/e2e --no-audit --no-fund --loglevel=error
end "1. Dependencies" ok

begin "2a. Release build"
scripts/build.sh build
end "2a. Release build" ok
begin "2b. Tests (Release, all but slow)"
check "2b. Tests (Release)" ctest --test-dir build -LE slow --output-on-failure -j "$jobs" --timeout 900

begin "3a. Sanitizer build (clang, ASan + UBSan, every suite and the fuzzers)"
cmake -S . -B build-asan "${sanitizer_flags[@]}" -DSTRATA_FUZZ=ON -DSTRATA_SANITIZE_ALL=ON >/dev/null
cmake --build build-asan -j "$jobs"
end "3a. Sanitizer build (ASan + UBSan)" ok
begin "3b. Tests under ASan + UBSan (all but slow)"
check "3b. Tests (ASan + UBSan)" \
  ctest --test-dir build-asan -LE slow --output-on-failure -j "$jobs" --timeout 900

begin "4. Fuzzing: each target ${fuzz_seconds} s under ASan + UBSan"
check "4. Fuzzing (${fuzz_seconds} s per target)" scripts/fuzz.sh build-asan "$fuzz_seconds"

begin "5a. ThreadSanitizer build (clang) of the unit suites"
cmake -S . -B build-tsan "${sanitizer_flags[@]}" -DSTRATA_TSAN=ON >/dev/null
cmake --build build-tsan -j "$jobs" --target strata_unit_tests
end "5a. ThreadSanitizer build" ok
begin "5b. Unit tests under TSan"
check "5b. Tests (TSan)" ctest --test-dir build-tsan -L unit --output-on-failure -j "$jobs" --timeout 900

echo
echo "== Summary (wall time per stage)"
printf '%s\n' "${summary[@]}"
total=$SECONDS
printf '%-44s %4d:%02d\n' "Total" $((total / 60)) $((total % 60))
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "== All tests passed"
