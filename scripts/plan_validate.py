#!/usr/bin/env python3
"""Checks `strata plan --simulate` against `strata bench serve` on this machine.

1. `strata plan MODEL FLAGS --calibrate` measures engine steps and writes a hardware file;
2. `strata serve MODEL FLAGS` is run and `strata bench serve` drives it with the random dataset at
   each --concurrency (closed loop, EOS ignored), max(--min-prompts, 4 x concurrency) prompts;
   (seed --seed + concurrency: no level reuses another's prompts from the prefix cache);
3. `strata plan MODEL FLAGS --hardware THAT_FILE --simulate` predicts the same runs;
4. the table compares TTFT p50, TPOT p50 and output tok/s (medians over --repeats runs, each
   with fresh prompts, and the predictions for the same prompts); the exit status is 1 when any
   prediction is off by more than --tolerance.

Timing-dependent by nature: run it on a quiet machine (ctest -L benchmark). Python 3, stdlib only.
Usage:
  scripts/plan_validate.py --model models/llama-134m \
      --flags "--tokenizer ../shared/data/tokenizers/llama2 --max-num-seqs 32" \
      --concurrency 1,4,16,32 --input-len 256 --output-len 64
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from kv_tier_bench import launch_server  # noqa: E402


def run(cmd, log):
    print("$ " + " ".join(shlex.quote(c) for c in cmd), file=log, flush=True)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log.write(r.stdout)
    log.flush()
    if r.returncode != 0:
        sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout[-3000:]}")
    return r.stdout


def start_server(args, flags, workdir):
    cmd = [args.strata, "serve", args.model, "--port", str(args.port), "--served-model-name", "m"] + \
        flags + shlex.split(args.server_flags)
    return launch_server(cmd, args.port, os.path.join(workdir, "server.log"))


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    a.add_argument("--model", required=True)
    a.add_argument("--flags", default="", help="engine flags for plan and serve alike")
    a.add_argument("--server-flags", default="", help="more flags for `strata serve` only")
    a.add_argument("--strata", default=os.path.join(os.path.dirname(__file__), "..", "build", "strata"))
    a.add_argument("--concurrency", default="1,4,16,32")
    a.add_argument("--input-len", type=int, default=256)
    a.add_argument("--output-len", type=int, default=64)
    a.add_argument("--min-prompts", type=int, default=8)
    a.add_argument("--prompts-per-concurrency", type=int, default=4,
                   help="prompts per run: this many times the concurrency (at 2x, the TTFT median "
                   "falls between the first wave's and the steady state's)")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--budget", type=float, default=120, help="--calibrate-budget seconds")
    a.add_argument("--hardware", help="use this hardware file instead of calibrating")
    a.add_argument("--tolerance", type=float, default=0.15)
    a.add_argument("--repeats", type=int, default=3,
                   help="benchmark runs per level (fresh prompts each); the table has medians")
    a.add_argument("--port", type=int, default=8171)
    a.add_argument("--workdir", help="keep the files here (default: a temporary folder)")
    a.add_argument("--markdown", help="append the table to this file")
    args = a.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="strata-plan-validate-")
    os.makedirs(workdir, exist_ok=True)
    flags = shlex.split(args.flags)
    levels = [int(c) for c in args.concurrency.split(",")]
    log = open(os.path.join(workdir, "commands.log"), "a")
    print(f"files in {workdir}", flush=True)

    hw = args.hardware
    if hw is None:
        hw = os.path.join(workdir, "calibrated.json")
        out = run([args.strata, "plan", args.model] + flags +
                  ["--calibrate", "--calibrate-output", hw, "--calibrate-budget", str(args.budget),
                   "--calibrate-steps", os.path.join(workdir, "calibration.csv")], log)
        print("\n".join(l for l in out.splitlines() if l.startswith(("Fitted", "  step", "  matmuls"))),
              flush=True)

    keys = ("median_ttft_ms", "median_tpot_ms", "output_throughput")
    runs = {c: [] for c in levels}  # (measured, predicted) per repetition
    server = start_server(args, flags, workdir)
    try:
        # Warm-up (page faults, first-use allocations), with prompts no measured run uses.
        run([args.strata, "bench", "serve", "--base-url", f"http://127.0.0.1:{args.port}",
             "--model", "m", "--dataset-name", "random", "--input-len", str(args.input_len),
             "--output-len", str(args.output_len), "--num-prompts", "4", "--seed", "999999",
             "--max-concurrency", "4"], log)
        for rep in range(args.repeats):
            for c in levels:
                n = max(args.min_prompts, args.prompts_per_concurrency * c)
                seed = args.seed + c + 1000 * rep
                name = f"bench-c{c}-r{rep}.json"
                run([args.strata, "bench", "serve", "--base-url", f"http://127.0.0.1:{args.port}",
                     "--model", "m", "--dataset-name", "random", "--input-len", str(args.input_len),
                     "--output-len", str(args.output_len), "--num-prompts", str(n), "--seed",
                     str(seed), "--max-concurrency", str(c), "--save-result", "--result-dir",
                     workdir, "--result-filename", name], log)
                with open(os.path.join(workdir, name)) as f:
                    m = json.load(f)
                runs[c].append([m, None])
                print(f"measured c={c} run {rep + 1}: TTFT p50 {m['median_ttft_ms']:.1f} ms, TPOT p50 "
                      f"{m['median_tpot_ms']:.2f} ms, {m['output_throughput']:.1f} output tok/s",
                      flush=True)
    finally:
        server.terminate()
        server.wait()

    for c in levels:
        n = max(args.min_prompts, args.prompts_per_concurrency * c)
        for rep in range(args.repeats):
            seed = args.seed + c + 1000 * rep
            stem = os.path.join(workdir, f"plan-c{c}-r{rep}")
            run([args.strata, "plan", args.model] + flags +
                ["--hardware", hw, "--simulate", "--workload",
                 f"random:in={args.input_len},out={args.output_len},n={n},seed={seed}",
                 "--max-concurrency", str(c), "--save-sweep", stem], log)
            with open(stem + ".json") as f:
                runs[c][rep][1] = json.load(f)[0]
    measured = {c: {k: statistics.median(r[0][k] for r in runs[c]) for k in keys} for c in levels}
    predicted = {c: {k: statistics.median(r[1][k] for r in runs[c]) for k in keys} for c in levels}

    rows, worst = [], 0.0
    for c in levels:
        m, p = measured[c], predicted[c]
        cells = [str(c)]
        for key in keys:
            err = p[key] / m[key] - 1 if m[key] else float("inf")
            worst = max(worst, abs(err))
            cells += [f"{m[key]:.1f}", f"{p[key]:.1f}", f"{err * 100:+.1f} %"]
        rows.append(cells)
    head = ["concurrency", "TTFT p50 measured (ms)", "predicted", "error", "TPOT p50 measured (ms)",
            "predicted", "error", "output tok/s measured", "predicted", "error"]
    table = "| " + " | ".join(head) + " |\n|" + "---|" * len(head) + "\n"
    table += "".join("| " + " | ".join(r) + " |\n" for r in rows)
    title = (f"{args.model} {args.flags}: random in={args.input_len}, out={args.output_len}, "
             f"max({args.min_prompts}, {args.prompts_per_concurrency} x concurrency) prompts, medians of "
             f"{args.repeats} runs, hardware file {hw}")
    print("\n" + title + "\n" + table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(title + "\n\n" + table + "\n")
    ok = worst <= args.tolerance
    print(f"largest error {worst * 100:.1f} % ({'within' if ok else 'OVER'} the {args.tolerance * 100:.0f} % tolerance)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
