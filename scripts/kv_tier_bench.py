#!/usr/bin/env python3
"""KV tier benchmarks against `strata serve` (docs/kv_tiers.md has the figures and how to read them).

  restart   a long shared prefix is served, the server is stopped and started again on the same
            --kv-disk-path, and a new prompt with that prefix is timed: its TTFT against the same
            prompt on a cold server (empty disk tier), and its output against the cold output.
  capacity  distinct prefixes cycled round robin, a working set several times the KV pool:
            prefix hit rate (pool + tiers) against the ideal (a pool holding everything), TTFT and
            throughput without tiers, with tiers, and ideal (via `strata bench serve`).
  overhead  a workload with no prefix reuse, tiers on (RAM + disk) against tiers off: throughput.

Every comparison alternates its configurations run by run and reports medians.
Usage: scripts/kv_tier_bench.py MODE --model PATH [--strata build/strata] [--reps 3] [...]
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def launch_server(cmd, port, log_path):
    """Starts `cmd` (a strata serve command line) and waits until /health answers on `port`."""
    log = open(log_path, "w")
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    for _ in range(1200):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", "/health")
            if c.getresponse().status == 200:
                return p
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.25)
    p.kill()
    sys.exit(f"server did not start: {' '.join(cmd)} (log in {log_path})")


def start_server(args, port, extra):
    cmd = [args.strata, "serve", args.model, "--port", str(port), "--threads", str(args.threads),
           "--served-model-name", "m", "--max-model-len", str(args.max_model_len),
           "--seed", "0"] + args.server_args.split() + extra
    return launch_server(cmd, port, os.path.join(args.workdir, f"server-{port}.log"))


def stop_server(p):
    p.terminate()  # graceful: the tiers finish their queued disk writes
    try:
        p.wait(timeout=120)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("GET", "/metrics")
    out = {}
    for line in c.getresponse().read().decode().splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r'([a-z_:]+)\{([^}]*)\} (\S+)', line)
        if m:
            tier = re.search(r'tier="(\w+)"', m.group(2))
            key = m.group(1) + ("." + tier.group(1) if tier else "")
            out[key] = out.get(key, 0.0) + float(m.group(3))
    return out


def stream_completion(port, prompt_ids, max_tokens):
    """A streamed greedy completion: (TTFT s, seconds from the first token to the end, text)."""
    body = json.dumps({"model": "m", "prompt": prompt_ids, "max_tokens": max_tokens,
                       "temperature": 0, "ignore_eos": True, "stream": True})
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"HTTP {r.status}: {r.read()[:300]}")
    first, text = None, ""
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]":
            continue
        for ch in json.loads(line[5:]).get("choices", []):
            if first is None:
                first = time.perf_counter()
            text += ch.get("text", "")
    return first - t0, time.perf_counter() - first, text


def timed_completion(port, prompt_ids, max_tokens):
    """TTFT (s) of a streamed greedy completion, and its text."""
    ttft, _, text = stream_completion(port, prompt_ids, max_tokens)
    return ttft, text


def restart(args):
    rng = random.Random(args.seed)
    ttft_cold, ttft_warm = [], []
    for rep in range(args.reps):
        prefix = [rng.randrange(3, args.vocab) for _ in range(args.prefix_len)]
        first = prefix + [rng.randrange(3, args.vocab) for _ in range(args.suffix_len)]
        second = prefix + [rng.randrange(3, args.vocab) for _ in range(args.suffix_len)]
        disk = tempfile.mkdtemp(dir=args.workdir)
        tier = ["--kv-disk-path", disk, "--kv-disk-size", "8"]
        # Cold: the second prompt on a fresh server with an empty disk tier.
        cold_dir = tempfile.mkdtemp(dir=args.workdir)
        p = start_server(args, args.port, ["--kv-disk-path", cold_dir, "--kv-disk-size", "8"])
        t_cold, out_cold = timed_completion(args.port, second, args.output_len)
        stop_server(p)
        shutil.rmtree(cold_dir)
        # Warm: the first prompt, restart, then the second.
        p = start_server(args, args.port, tier)
        timed_completion(args.port, first, args.output_len)
        stop_server(p)
        p = start_server(args, args.port, tier)
        t_warm, out_warm = timed_completion(args.port, second, args.output_len)
        m = metrics(args.port)
        stop_server(p)
        shutil.rmtree(disk)
        ttft_cold.append(t_cold)
        ttft_warm.append(t_warm)
        same = "identical" if out_cold == out_warm else "DIFFERENT"
        print(f"rep {rep}: cold TTFT {t_cold * 1e3:.1f} ms, after restart {t_warm * 1e3:.1f} ms "
              f"({t_warm / t_cold:.3f}), output {same}; disk hits "
              f"{m.get('strata:kv_tier_hits_total.disk', 0):.0f} blocks, external hit tokens "
              f"{m.get('vllm:external_prefix_cache_hits_total', 0):.0f}", flush=True)
        if out_cold != out_warm:
            print(f"  cold: {out_cold!r}\n  warm: {out_warm!r}")
    c, w = statistics.median(ttft_cold), statistics.median(ttft_warm)
    print(f"median TTFT: cold {c * 1e3:.1f} ms, after restart {w * 1e3:.1f} ms, ratio {w / c:.3f}")


def bench_serve(args, port, num_prompts, seed):
    cmd = [args.strata, "bench", "serve", "--base-url", f"http://127.0.0.1:{port}", "--model", "m",
           "--dataset-name", "prefix-repetition", "--prefix-repetition-order", "round-robin",
           "--prefix-repetition-prefix-len", str(args.prefix_len),
           "--prefix-repetition-suffix-len", str(args.suffix_len),
           "--prefix-repetition-num-prefixes", str(args.num_prefixes),
           "--prefix-repetition-output-len", str(args.output_len),
           "--num-prompts", str(num_prompts), "--max-concurrency", str(args.concurrency),
           "--tokenizer", args.tokenizer or args.model, "--seed", str(seed), "--disable-tqdm"]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    get = lambda label: float(re.search(label + r":\s+([\d.]+)", out).group(1))
    return get("Median TTFT \\(ms\\)"), get("Output token throughput \\(tok/s\\)"), get(
        "Total token throughput \\(tok/s\\)")


def capacity(args):
    pool_tokens = args.pool_tokens
    kv = f"{pool_tokens * args.kv_bytes_per_token}"
    ws = args.num_prefixes * args.prefix_len
    print(f"pool {pool_tokens} tokens, working set {args.num_prefixes} x {args.prefix_len} = {ws} "
          f"tokens ({ws / pool_tokens:.1f}x the pool), {args.cycles} cycles round robin")
    tier_gib = f"{2 * ws * args.kv_bytes_per_token / 2**30:.3f}"
    configs = {
        "no tiers": ["--kv-cache-memory", kv],
        "tiers": ["--kv-cache-memory", kv, "--kv-offloading-size", tier_gib,
                  "--kv-disk-path", "DISK", "--kv-disk-size", tier_gib],
        "ideal": ["--kv-cache-memory", f"{2 * ws * args.kv_bytes_per_token}"],
    }
    results = {k: [] for k in configs}
    n = args.num_prefixes * args.cycles
    for rep in range(args.reps):
        for name, extra in configs.items():
            if name == "ideal" and rep > 0:
                continue  # the hit rate of a pool that holds everything is the same every time
            disk = tempfile.mkdtemp(dir=args.workdir)
            p = start_server(args, args.port, [disk if a == "DISK" else a for a in extra])
            before = metrics(args.port)
            ttft, out_tps, total_tps = bench_serve(args, args.port, n, args.seed + rep)
            after = metrics(args.port)
            stop_server(p)
            shutil.rmtree(disk)
            d = lambda k: after.get(k, 0) - before.get(k, 0)
            q = d("vllm:prefix_cache_queries_total")
            hits = d("vllm:prefix_cache_hits_total") + d("vllm:external_prefix_cache_hits_total")
            results[name].append((hits / q if q else 0, ttft, out_tps, total_tps))
            print(f"rep {rep} {name:8s}: hit rate {hits / q:.3f} (pool {d('vllm:prefix_cache_hits_total') / q:.3f}), "
                  f"median TTFT {ttft:.1f} ms, output {out_tps:.1f} tok/s, total {total_tps:.1f} tok/s",
                  flush=True)
    ideal = statistics.median(r[0] for r in results["ideal"])
    for name, rs in results.items():
        hr = statistics.median(r[0] for r in rs)
        print(f"{name:8s}: hit rate {hr:.3f} = {hr / ideal * 100:.1f}% of ideal, median TTFT "
              f"{statistics.median(r[1] for r in rs):.1f} ms, total throughput "
              f"{statistics.median(r[3] for r in rs):.1f} tok/s")


def overhead(args):
    results = {"off": [], "on": []}
    for rep in range(args.reps):
        for name in ("off", "on"):
            disk = tempfile.mkdtemp(dir=args.workdir)
            extra = ["--kv-cache-memory", "2GiB"]
            if name == "on":
                extra += ["--kv-offloading-size", "4", "--kv-disk-path", disk, "--kv-disk-size", "8"]
            p = start_server(args, args.port, extra)
            cmd = [args.strata, "bench", "serve", "--base-url", f"http://127.0.0.1:{args.port}",
                   "--model", "m", "--dataset-name", "random", "--input-len", "128",
                   "--output-len", "64", "--num-prompts", "64", "--max-concurrency", "8",
                   "--tokenizer", args.tokenizer or args.model, "--seed", str(100 + rep),
                   "--disable-tqdm"]
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
            stop_server(p)
            shutil.rmtree(disk)
            tps = float(re.search(r"Output token throughput \(tok/s\):\s+([\d.]+)", out).group(1))
            results[name].append(tps)
            print(f"rep {rep} tiers {name}: {tps:.1f} output tok/s", flush=True)
    off, on = statistics.median(results["off"]), statistics.median(results["on"])
    print(f"median output throughput: tiers off {off:.1f}, tiers on {on:.1f} tok/s, ratio {on / off:.3f}")


def main():
    a = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    a.add_argument("mode", choices=["restart", "capacity", "overhead"])
    a.add_argument("--model", required=True)
    a.add_argument("--tokenizer", default="")
    a.add_argument("--strata", default=os.path.join(os.path.dirname(__file__), "..", "build", "strata"))
    a.add_argument("--server-args", default="", help="more `strata serve` flags")
    a.add_argument("--threads", type=int, default=2)
    a.add_argument("--port", type=int, default=8131)
    a.add_argument("--reps", type=int, default=3)
    a.add_argument("--seed", type=int, default=1)
    a.add_argument("--vocab", type=int, default=512, help="restart: prompt ids are drawn below this")
    a.add_argument("--max-model-len", type=int, default=8192)
    a.add_argument("--prefix-len", type=int, default=4096)
    a.add_argument("--suffix-len", type=int, default=32)
    a.add_argument("--output-len", type=int, default=16)
    a.add_argument("--num-prefixes", type=int, default=32)
    a.add_argument("--cycles", type=int, default=3)
    a.add_argument("--concurrency", type=int, default=4)
    a.add_argument("--pool-tokens", type=int, default=8192)
    a.add_argument("--kv-bytes-per-token", type=int, default=36864)
    a.add_argument("--workdir", default="")
    args = a.parse_args()
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="strata-kv-bench-")
    {"restart": restart, "capacity": capacity, "overhead": overhead}[args.mode](args)


if __name__ == "__main__":
    main()
