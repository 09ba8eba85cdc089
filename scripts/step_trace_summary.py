#!/usr/bin/env python3
"""Summarises an engine step trace (strata serve|generate|bench throughput --step-trace PATH).

Prints where the engine's time went: the total and share of each phase, the median step time of
steps with and without prefill tokens, and per request the queueing time (arrival -> first
scheduled), the prefill time (first scheduled -> end of the step that computed its last prompt
token) and the first-token time (arrival -> end of the step that produced its first token; the
engine's part of TTFT, without HTTP). The line format is described in src/engine/step_trace.h.

A file that several runs appended to holds several runs (the step index restarts at 0): the last
one is summarised unless --run says otherwise.

  scripts/step_trace_summary.py trace.jsonl [--run K] [--requests N]
"""

import argparse
import json
import statistics
import sys

PHASES = ["wait", "between", "schedule", "prepare", "forward", "sample", "output"]


def read_runs(path):
    runs = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{lineno}: not JSON ({e})")
            if not isinstance(rec, dict) or "step" not in rec or "phases" not in rec:
                sys.exit(f"{path}:{lineno}: not a step trace line (no step or phases)")
            if rec["step"] == 0 or not runs:
                runs.append([])
            runs[-1].append(rec)
    return runs


def ms(seconds):
    return f"{seconds * 1e3:10.2f}"


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))
    return s[k]


def summarise(steps, max_requests):
    n = len(steps)
    first_t = steps[0]["t"]
    last_end = steps[-1]["t"] + steps[-1]["dur"]
    print(f"{n} steps over {last_end - first_t:.3f} s (first step start to last step end)")

    totals = {p: sum(s["phases"].get(p, 0.0) for s in steps) for p in PHASES}
    grand = sum(totals.values())
    print("\nphase        total ms   share  mean ms/step")
    for p in PHASES:
        share = totals[p] / grand if grand > 0 else 0.0
        print(f"{p:<10} {ms(totals[p])} {share * 100:6.1f}%  {totals[p] / n * 1e3:10.3f}")
    print(f"{'all':<10} {ms(grand)} {100.0:6.1f}%")
    comm = [s.get("comm", 0.0) for s in steps]
    if any(c > 0 for c in comm):
        # Several ranks: the part of forward + sample spent in the parallel groups' calls.
        inside = totals["forward"] + totals["sample"]
        share = sum(comm) / inside if inside > 0 else 0.0
        print(f"{'comm':<10} {ms(sum(comm))} {share * 100:6.1f}% of forward+sample, "
              f"median {statistics.median(comm) * 1e3:.3f} ms/step")

    with_prefill = [s["dur"] for s in steps if s.get("prefill_tokens", 0) > 0]
    without = [s["dur"] for s in steps if s.get("prefill_tokens", 0) == 0]
    print("\nsteps               count  median ms   mean ms  tokens/step")
    for name, durs, sel in (
        ("with prefill", with_prefill, lambda s: s.get("prefill_tokens", 0) > 0),
        ("decode only", without, lambda s: s.get("prefill_tokens", 0) == 0),
    ):
        if not durs:
            print(f"{name:<18} {0:6d}")
            continue
        toks = [s["prefill_tokens"] + s["decode_tokens"] for s in steps if sel(s)]
        print(f"{name:<18} {len(durs):6d} {ms(statistics.median(durs))} "
              f"{ms(statistics.mean(durs))} {statistics.mean(toks):12.1f}")
    print(f"mean running {statistics.mean(s['running'] for s in steps):.1f}, "
          f"mean waiting {statistics.mean(s['waiting'] for s in steps):.1f}")

    # Per request (and choice).
    reqs = {}
    for s in steps:
        end = s["t"] + s["dur"]
        for e in s.get("events", []):
            key = (e["id"], e.get("choice", -1))
            r = reqs.setdefault(key, {"arrival": None, "first_scheduled": None,
                                      "prefill_end": None, "first_token": None,
                                      "prefill_steps": 0, "prefill_tokens": 0})
            if e.get("first_scheduled"):
                r["arrival"] = e.get("arrival")
                r["first_scheduled"] = s["t"]
            if e.get("prefill"):
                r["prefill_end"] = end
                r["prefill_steps"] += 1
                r["prefill_tokens"] += e.get("tokens", 0)
            if e.get("first_token") and r["first_token"] is None:
                r["first_token"] = end
    rows = []
    for (rid, choice), r in reqs.items():
        if r["arrival"] is None or r["first_scheduled"] is None:
            continue  # arrived in an earlier run, or the file starts mid-way
        queue = r["first_scheduled"] - r["arrival"]
        prefill = (r["prefill_end"] - r["first_scheduled"]) if r["prefill_end"] else None
        ttft = (r["first_token"] - r["arrival"]) if r["first_token"] else None
        name = rid if choice < 0 else f"{rid}/{choice}"
        rows.append((name, queue, prefill, ttft, r["prefill_steps"], r["prefill_tokens"]))
    print(f"\n{len(rows)} requests (arrival -> first scheduled -> prefill done -> first token)")
    if not rows:
        return
    print("               p50 ms     p90 ms     max ms")
    for label, idx in (("queueing", 1), ("prefill", 2), ("first token", 3)):
        vals = [row[idx] for row in rows if row[idx] is not None]
        if vals:
            print(f"{label:<12} {ms(percentile(vals, 0.5))} {ms(percentile(vals, 0.9))} "
                  f"{ms(max(vals))}")
    chunks = [row[4] for row in rows if row[4] > 0]
    if chunks:
        print(f"prefill steps per request: mean {statistics.mean(chunks):.2f}, max {max(chunks)}")
    rows.sort(key=lambda row: -(row[3] if row[3] is not None else -1))
    shown = rows if max_requests < 0 else rows[:max_requests]
    if shown:
        print(f"\n{'request':<24} {'queue ms':>10} {'prefill ms':>10} {'first tok ms':>12} "
              f"{'chunks':>6} {'prompt':>7}")
        for name, queue, prefill, ttft, nsteps, ntok in shown:
            f = lambda v: f"{v * 1e3:10.2f}" if v is not None else f"{'-':>10}"
            print(f"{name[:24]:<24} {f(queue)} {f(prefill)} {f(ttft):>12} {nsteps:6d} {ntok:7d}")
        if len(shown) < len(rows):
            print(f"(the {len(shown)} slowest to their first token of {len(rows)}; "
                  "--requests -1 lists all)")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trace", help="the file --step-trace wrote")
    ap.add_argument("--run", type=int, default=-1,
                    help="which run of the file (0 = first; default -1, the last)")
    ap.add_argument("--requests", type=int, default=10,
                    help="requests to list, slowest first token first (-1: all; default 10)")
    a = ap.parse_args()
    runs = read_runs(a.trace)
    if not runs:
        sys.exit(f"{a.trace}: no steps")
    if not -len(runs) <= a.run < len(runs):
        sys.exit(f"{a.trace} holds {len(runs)} run(s); --run {a.run} is not one of them")
    if len(runs) > 1:
        print(f"{a.trace} holds {len(runs)} runs; this is run {a.run % len(runs)}")
    summarise(runs[a.run], a.requests)


if __name__ == "__main__":
    main()
