#!/bin/bash
# Tensor parallelism on one machine: `strata serve --tensor-parallel-size 2 --threads 1` against
# `--threads 2` in one process, decode (concurrency 1) and throughput (concurrency 8), alternating
# the two, 3 rounds; TP 2 writes a step trace (its "comm" field: time in the all-gathers).
# Usage: scripts/tp_bench.sh STRATA MODEL OUTDIR [more serve flags]   (docs/performance.md)
set -u
S=$1; M=$2; OUT=$3; shift 3
mkdir -p $OUT
port=8791
serve() {  # name flags...
  local name=$1; shift
  $S serve $M --load-format dummy --kv-cache-memory 256MiB --max-model-len 1024 --served-model-name m \
     --port $port --seed 0 "$@" > $OUT/$name.server.log 2>&1 &
  SP=$!
  for i in $(seq 1 600); do curl -sf localhost:$port/health >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "no server"; cat $OUT/$name.server.log; exit 1
}
bench() {  # name c n
  $S bench serve --base-url http://127.0.0.1:$port --model m --dataset-name random --input-len 128 \
     --output-len 64 --num-prompts $3 --max-concurrency $2 --seed $4 --temperature 0 --save-result --result-dir $OUT \
     --result-filename $1.json > $OUT/$1.bench.log 2>&1
  python3 -c "import json;m=json.load(open('$OUT/$1.json'));print('$1', 'tpot_p50 %.2f ms' % m['median_tpot_ms'], 'out_tok/s %.1f' % m['output_throughput'])"
}
for round in 1 2 3; do
  for cfg in tp1 tp2; do
    if [ $cfg = tp1 ]; then serve $cfg-r$round --threads 2 "$@"; else serve $cfg-r$round --tensor-parallel-size 2 --threads 1 --step-trace $OUT/$cfg-r$round.trace "$@"; fi
    bench warm-$cfg-r$round 4 4 999 > /dev/null
    bench $cfg-c1-r$round 1 6 $round
    bench $cfg-c8-r$round 8 24 $((round+100))
    kill -TERM $SP; wait $SP
  done
done
