#!/usr/bin/env python3
"""Speculative decoding benchmark against `strata serve`: decode tokens/s of greedy requests one at
a time (batch 1) with and without --speculative-config, servers alternating run by run, medians.

  --prompts repeat   prompts built from a text repeated (copy/edit workloads, where prompt lookup
                     shines); the model's greedy continuation is printed as acceptance figures
  --prompts random   random token prompts (n-gram drafts rarely right: the adaptivity case)

Decode tok/s of a request = (output tokens - 1) / (end - first token), from the stream.
Usage: scripts/spec_bench.py --model PATH [--spec '{"method":"ngram",...}'] [--reps 3]
"""
import argparse
import os
import random
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from kv_tier_bench import metrics, start_server, stop_server, stream_completion  # noqa: E402


def make_prompts(args):
    rng = random.Random(args.seed)
    out = []
    for _ in range(args.num_prompts):
        if args.prompts == "random":
            out.append([rng.randrange(3, args.vocab) for _ in range(args.input_len)])
        else:
            text = [rng.randrange(3, args.vocab) for _ in range(args.input_len // 3)]
            out.append(text + text + text[: args.input_len - 2 * len(text)])
    return out


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    a.add_argument("--model", required=True)
    a.add_argument("--strata", default=os.path.join(os.path.dirname(__file__), "..", "build", "strata"))
    a.add_argument("--server-args", default="")
    a.add_argument("--spec", default='{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}')
    a.add_argument("--prompts", choices=["repeat", "random"], default="repeat")
    a.add_argument("--num-prompts", type=int, default=4)
    a.add_argument("--input-len", type=int, default=256)
    a.add_argument("--output-len", type=int, default=128)
    a.add_argument("--vocab", type=int, default=32000)
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--port", type=int, default=8141)
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--max-model-len", type=int, default=2048)
    args = a.parse_args()
    args.workdir = tempfile.mkdtemp(prefix="strata-spec-bench-")
    prompts = make_prompts(args)
    res = {"plain": [], "spec": []}
    texts = {}
    for rep in range(args.reps):
        for name in ("plain", "spec"):
            extra = ["--speculative-config", args.spec] if name == "spec" else []
            p = start_server(args, args.port, extra)
            stream_completion(args.port, prompts[0][:32], 8)  # warm-up
            before = metrics(args.port)
            rates = []
            for i, pr in enumerate(prompts):
                _, decode_s, text = stream_completion(args.port, pr, args.output_len)
                rates.append((args.output_len - 1) / decode_s)
                if texts.setdefault(i, text) != text:
                    print(f"  prompt {i}: output DIFFERS from the first run")
            after = metrics(args.port)
            stop_server(p)
            rate = statistics.median(rates)
            res[name].append(rate)
            line = f"rep {rep} {name:5s}: decode {rate:.1f} tok/s (median over prompts)"
            if name == "spec":
                d = lambda k: after.get(k, 0) - before.get(k, 0)
                drafts = d("vllm:spec_decode_num_draft_tokens_total")
                acc = d("vllm:spec_decode_num_accepted_tokens_total")
                n = d("vllm:spec_decode_num_drafts_total")
                if drafts:
                    line += (f", acceptance {acc / drafts * 100:.1f}% of {drafts:.0f} draft tokens, "
                             f"{acc / n:.2f} accepted per draft")
            print(line, flush=True)
    plain, spec = statistics.median(res["plain"]), statistics.median(res["spec"])
    print(f"median decode tok/s: plain {plain:.1f}, speculative {spec:.1f}, ratio {spec / plain:.2f}")


if __name__ == "__main__":
    main()
