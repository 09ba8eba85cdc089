#!/usr/bin/env bash
# Runs every libFuzzer target of tests/fuzz for a bounded time under ASan + UBSan and reports the
# inputs executed per target. scripts/test.sh calls it after the sanitizer build.
# Usage: scripts/fuzz.sh [BUILD_DIR] [SECONDS_PER_TARGET] [TARGET...]
#   BUILD_DIR  configured with -DSTRATA_FUZZ=ON (default build-asan, as scripts/test.sh makes it);
#              the fuzzers are built here first (`--target strata_fuzzers`).
#   SECONDS    per target (default 30); targets run $(nproc) at a time.
#   TARGET     default: all of tests/fuzz/CMakeLists.txt's fuzz_names.
# Each target starts from its seed corpus tests/fuzz/<target>/ (never written) and what earlier
# runs found (BUILD_DIR/fuzz-corpus/<target>/, kept between runs), and mutates with the tokens of
# tests/fuzz/dict/<target>.dict (JSON keys, HTTP fields, Jinja keywords ...). A crash, sanitizer report, leak,
# timeout (an input taking over 25 s: a hang, not a slow machine) or out-of-memory fails the run and saves the input under
# BUILD_DIR/fuzz-artifacts/<target>/. Replay it with BUILD_DIR/tests/fuzz/fuzz_<target> FILE; once
# fixed, add it as tests/fuzz/<target>/regress-<what> so that fuzz_replay_tests runs it in every
# build, and add a unit test for the bug in the module's suite.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-asan}
secs=${2:-30}
shift $(($# < 2 ? $# : 2))
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<<"$(sed -n 's/^set(fuzz_names \(.*\))$/\1/p' tests/fuzz/CMakeLists.txt)"
fi
jobs=$(nproc)

cmake --build "$dir" -j "$jobs" --target strata_fuzzers

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
run_one() {
  local t=$1
  local dict=()
  [ -f "tests/fuzz/dict/$t.dict" ] && dict=(-dict="tests/fuzz/dict/$t.dict")
  mkdir -p "$dir/fuzz-corpus/$t" "$dir/fuzz-artifacts/$t"
  "$dir/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$dir/fuzz-artifacts/$t/" "${dict[@]}" \
    "$dir/fuzz-corpus/$t" "tests/fuzz/$t" >"$dir/fuzz-artifacts/$t.log" 2>&1
}

pids=()
for t in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$t" &
  pids+=($!)
done

failed=0
printf '%-16s %12s %8s  %s\n' target executions corpus result
for i in "${!targets[@]}"; do
  t=${targets[$i]}
  rc=0
  wait "${pids[$i]}" || rc=$?
  log="$dir/fuzz-artifacts/$t.log"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  corpus=$(find "$dir/fuzz-corpus/$t" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    result=ok
  else
    failed=1
    result="FAILED (exit $rc): $(grep -m1 -E '^(SUMMARY|==[0-9]+==ERROR)|Check failed|ERROR: libFuzzer' "$log" || true)"
  fi
  printf '%-16s %12s %8s  %s\n' "$t" "${execs:-?}" "$corpus" "$result"
done
if [ "$failed" -ne 0 ]; then
  for t in "${targets[@]}"; do
    log="$dir/fuzz-artifacts/$t.log"
    if grep -q -E 'Test unit written|ERROR:' "$log"; then
      echo "---- $t (full log: $log)"
      grep -E -A40 '^==[0-9]+==ERROR|runtime error|Check failed|ERROR: libFuzzer' "$log" | head -60
      grep -E 'Test unit written' "$log" || true
    fi
  done
  echo "fuzz: a target failed; replay with $dir/tests/fuzz/fuzz_<target> <artifact>" >&2
  exit 1
fi
