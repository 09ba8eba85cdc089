#!/usr/bin/env python3
"""A small closed-loop serving benchmark using only the Python standard library, so that Strata's
serving figures can be checked with a client that is not Strata's own (`strata bench serve`).

Sends N completions (`/v1/completions`, streamed, prompts of random token ids, `ignore_eos`) from
C concurrent workers and prints output tokens/s and TTFT percentiles. Works against any server
that takes token-id prompts and `ignore_eos` (Strata, vLLM, llama-server).

  scripts/neutral_bench.py --base-url http://127.0.0.1:8000 --concurrency 8 --num-prompts 64 \
      --input-len 128 --output-len 64
"""
import argparse
import http.client
import json
import random
import statistics
import threading
import time
import urllib.parse


def one_request(url, model, prompt, output_len, extra=None):
    """Streams one completion; returns (ttft seconds, output tokens, total seconds)."""
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
    body = {"prompt": prompt, "max_tokens": output_len, "temperature": 0, "stream": True,
            "ignore_eos": True, "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    if extra:
        body.update(extra)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:200]!r}")
    ttft, chunks, usage = None, 0, None
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        event = json.loads(data)
        if event.get("usage"):
            usage = event["usage"].get("completion_tokens")
        choices = event.get("choices") or []
        if choices and (choices[0].get("text") or choices[0].get("delta")):
            if ttft is None:
                ttft = time.perf_counter() - start
            chunks += 1
    conn.close()
    return ttft, usage if usage is not None else chunks, time.perf_counter() - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", default="")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--num-prompts", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=32000, help="token ids are drawn below this")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--extra", default="",
                    help="JSON object merged into every request body, e.g. a response_format")
    args = ap.parse_args()
    extra = json.loads(args.extra) if args.extra else None
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(100, args.vocab - 100) for _ in range(args.input_len)]
               for _ in range(args.num_prompts)]
    results, errors, lock = [], [], threading.Lock()
    next_index = [0]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                next_index[0] += 1
            if i >= len(prompts):
                return
            try:
                r = one_request(args.base_url, args.model, prompts[i], args.output_len, extra)
                with lock:
                    results.append(r)
            except Exception as e:  # noqa: BLE001 - reported, counted as a failure
                with lock:
                    errors.append(str(e))

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    ttfts = sorted(r[0] * 1000 for r in results if r[0] is not None)
    out_tokens = sum(r[1] for r in results)
    print(f"requests: {len(results)} ok, {len(errors)} failed" +
          (f" (first error: {errors[0]})" if errors else ""))
    print(f"output token throughput (tok/s): {out_tokens / wall:.2f}")
    if ttfts:
        print(f"TTFT ms: median {statistics.median(ttfts):.1f}, "
              f"p90 {ttfts[min(len(ttfts) - 1, int(0.9 * len(ttfts)))]:.1f}, "
              f"mean {statistics.mean(ttfts):.1f}")


if __name__ == "__main__":
    main()
