#!/bin/bash
# Pipeline parallelism on one machine: `strata serve --pipeline-parallel-size 2 --threads 1` with
# the stages overlapping (two micro-batches in flight, the default) against the same with
# STRATA_PP_MAX_INFLIGHT=1 (one batch in flight, stage after stage), throughput at concurrency 8,
# alternating the two, 3 rounds; each writes a step trace.
# Usage: scripts/pp_bench.sh STRATA MODEL OUTDIR [more serve flags]   (docs/performance.md)
set -u
S=$1; M=$2; OUT=$3; shift 3
mkdir -p $OUT
port=8793
serve() {  # name flags...
  local name=$1; shift
  $S serve $M --load-format dummy --kv-cache-memory 256MiB --max-model-len 1024 --served-model-name m \
     --port $port --seed 0 "$@" > $OUT/$name.server.log 2>&1 &
  SP=$!
  for i in $(seq 1 600); do curl -sf localhost:$port/health >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "no server"; cat $OUT/$name.server.log; exit 1
}
bench() {  # name c n seed
  $S bench serve --base-url http://127.0.0.1:$port --model m --dataset-name random --input-len 128 \
     --output-len 64 --num-prompts $3 --max-concurrency $2 --seed $4 --temperature 0 --save-result --result-dir $OUT \
     --result-filename $1.json > $OUT/$1.bench.log 2>&1
  python3 -c "import json;m=json.load(open('$OUT/$1.json'));print('$1', 'tpot_p50 %.2f ms' % m['median_tpot_ms'], 'out_tok/s %.1f' % m['output_throughput'], 'req/s %.3f' % m['request_throughput'])"
}
for round in 1 2 3; do
  for cfg in overlap serial; do
    if [ $cfg = overlap ]; then unset STRATA_PP_MAX_INFLIGHT; else export STRATA_PP_MAX_INFLIGHT=1; fi
    serve $cfg-r$round --pipeline-parallel-size 2 --threads 1 --step-trace $OUT/$cfg-r$round.trace "$@"
    bench warm-$cfg-r$round 4 4 999 > /dev/null
    bench $cfg-c8-r$round 8 24 $((round+100))
    kill -TERM $SP; wait $SP
  done
done
unset STRATA_PP_MAX_INFLIGHT
