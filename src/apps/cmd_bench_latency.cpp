// strata bench latency MODEL: prefill and decode speed of one batch of random prompts, with this
// machine's memory read bandwidth measured in the same run and the decode bandwidth utilisation
// (weight bytes per decode step x steps per second / measured bandwidth). With --context-len N,
// decode only, at N tokens of context without computing a prefill (the KV blocks and the
// per-sequence state are zero-filled, positions start at N), with the KV bytes a decode token
// reads there: how long context costs a model's KV layout (DeepSeek-V4's compressed one vs
// V3's MLA, docs/performance.md).
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/logging.h"
#include "core/rng.h"
#include "core/strings.h"
#include "engine/memory_plan.h"
#include "kernels/backend.h"
#include "kernels/bandwidth.h"
#include "kernels/op_profile.h"
#include "kv/cache_config.h"
#include "kv/kv_storage.h"
#include "model/model.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add_int("input-len", 128, "prompt tokens per sequence");
  o.add_int("output-len", 64, "generated tokens per sequence");
  o.add_int("context-len", 0,
            "decode at this many tokens of context without computing a prefill: the KV blocks "
            "and per-sequence state are zero-filled and positions start here (--input-len is "
            "then unused); 0: prefill --input-len random prompts first");
  o.add_int("batch-size", 1, "sequences run together");
  o.add_int("num-iters", 3, "measured iterations (the best is reported)");
  o.add_int("num-iters-warmup", 1, "warm-up iterations");
  o.add_int("max-num-batched-tokens", 2048, "most prompt tokens per forward pass (prefill chunk)");
  o.add_string("load-format", "auto", "auto, safetensors, gguf or dummy");
  o.add_string("dtype", "auto", "weight dtype: auto, float32, bfloat16, float16");
  o.add_int("block-size", 16,
            "KV cache block size (tokens per block); not given: 256 for hybrid layouts "
            "(DeepSeek-V4), 64 for DeepSeek-V3.2's fp8_ds_mla, as the engine");
  o.add_string("kv-cache-dtype", "auto",
               "auto (model dtype), float32, bfloat16, float16, fp8 (fp8_ds_mla for "
               "DeepSeek-V3.2), fp8_ds_mla (MLA models)");
  o.add_string("hf-overrides", "", "JSON merged into config.json");
  o.add_int("threads", ThreadPool::hardware_threads(), "compute threads");
  o.add_string("kernels", "auto",
               "kernel variant: auto (the fastest this CPU runs) or a name (reference, portable, "
               "avx2, ...)");
  o.add_int("seed", 0, "seed of the random prompts and dummy weights");
  o.add_int("bandwidth-mib", 1024, "buffer size for the bandwidth measurement (MiB)");
  o.add_bool("profile", false,
             "after the measured iterations, run one more with every kernel op timed and print "
             "where the prefill's and a decode step's time go");
}

DType kv_dtype_for(const std::string& s, DType weights) {
  DType d;
  if (s == "auto")
    return (weights == DType::kF32 || weights == DType::kF16 || weights == DType::kBF16)
               ? weights
               : DType::kBF16;
  if (s == "fp8" || s == "fp8_e4m3" || s == "fp8_ds_mla") return DType::kF8E4M3;
  if (parse_dtype(s, &d)) return d;
  return DType::kBF16;
}

int run(const Args& args) {
  if (args.positional().size() != 1) {
    std::fprintf(stderr, "usage: strata bench latency MODEL [options]\n");
    return 2;
  }
  const int64_t in_len = args.get_int("input-len"), out_len = args.get_int("output-len");
  const int64_t batch = args.get_int("batch-size");
  const int64_t chunk = args.get_int("max-num-batched-tokens");
  const int64_t context = args.get_int("context-len");
  const bool at_context = context > 0;
  // Positions of the prompt tokens [0, prompt_end), then the decode steps from decode_start.
  const int64_t prompt_end = at_context ? 0 : in_len;
  const int64_t decode_start = at_context ? context : in_len;
  if (context < 0) {
    std::fprintf(stderr, "strata bench latency: --context-len must be >= 0\n");
    return 2;
  }
  if (in_len < 1 || out_len < 1 || batch < 1 || chunk < 1 || args.get_int("block-size") < 1) {
    std::fprintf(stderr,
                 "strata bench latency: lengths, batch size, chunk and block size must be >= 1\n");
    return 2;
  }
  auto backend_or = CpuBackend::create(
      {.kernels = args.get("kernels"), .threads = static_cast<int>(args.get_int("threads"))});
  if (!backend_or.ok()) {
    std::fprintf(stderr, "strata bench latency: %s\n", backend_or.status().message().c_str());
    return 2;
  }
  Backend& backend = **backend_or;
  ThreadPool& pool = backend.pool();
  LoadOptions lo;
  lo.model = args.positional()[0];
  lo.load_format = args.get("load-format");
  lo.dtype = args.get("dtype");
  lo.hf_overrides = args.get("hf-overrides");
  lo.seed = static_cast<uint64_t>(args.get_int("seed"));
  lo.pool = &pool;
  lo.allocator = &backend.allocator();
  const int64_t max_len = decode_start + out_len;
  lo.limits = {at_context ? batch : std::max(std::min(chunk, in_len * batch), batch), max_len,
               batch};
  auto loaded = load_model(lo);
  if (!loaded.ok()) {
    std::fprintf(stderr, "strata bench latency: %s\n", loaded.status().message().c_str());
    return 1;
  }
  Model& model = *loaded->model;
  const ModelConfig& cfg = model.config();
  std::fprintf(stderr, "model: %s (%s, %.1fM parameters, weights %s, %s)\n", cfg.summary().c_str(),
               loaded->format.c_str(), model.parameter_count() / 1e6,
               dtype_name(model.weight_dtype()), format_bytes(model.weight_bytes_total()).c_str());

  KvSpec ks = model.kv_spec();
  DType kv_dtype = kv_dtype_for(args.get("kv-cache-dtype"), model.weight_dtype());
  // fp8_ds_mla by name, or fp8 for DeepSeek-V3.2 (as the engine decides, kv/cache_config.h).
  kv::CacheConfig cache;
  cache.kv_fp8_ds_mla = args.get("kv-cache-dtype") == "fp8_ds_mla";
  auto ds = kv::use_fp8_ds_mla(cache, kv_dtype, ks.latent_dim > 0, ks.aux_dim > 0,
                               model.config().architecture);
  if (!ds.ok()) {
    std::fprintf(stderr, "strata bench latency: %s\n", ds.status().message().c_str());
    return 2;
  }
  const bool ds_mla = *ds;
  auto block_or =
      engine::resolve_block_size(args.get_int("block-size"), args.is_set("block-size"),
                                 ks.block_size_multiple, ks.hybrid(), ds_mla && ks.aux_dim > 0);
  if (!block_or.ok()) {
    std::fprintf(stderr, "strata bench latency: %s\n", block_or.status().message().c_str());
    return 2;
  }
  const int64_t block = *block_or;
  const int64_t blocks_per_seq = (max_len + block - 1) / block;
  KvStorageSpec spec{ks.num_layers,
                     batch * blocks_per_seq + 1,
                     block,
                     ks.num_kv_heads,
                     ks.head_dim,
                     kv_dtype,
                     ks.has_v,
                     ks.aux_dim,
                     ks.ds_mla_latent(ds_mla)};
  if (ks.hybrid())
    for (int64_t l = 0; l < ks.num_layers; ++l)
      spec.layer_block_bytes.push_back(ks.layer_block_bytes(l, block, kv_dtype));
  auto storage = KvStorage::allocate(spec, backend.allocator());
  if (!storage.ok()) {
    std::fprintf(stderr, "strata bench latency: %s\n", storage.status().message().c_str());
    return 1;
  }
  std::vector<PagedKvLayer> layers;
  for (int64_t l = 0; l < ks.num_layers; ++l)
    layers.push_back({kv_dtype, block, ks.num_kv_heads, ks.head_dim, storage->k(l), storage->v(l),
                      1.0f, 1.0f, storage->k_scales(l), storage->v_scales(l), storage->aux(l),
                      ks.aux_dim, storage->aux_scales(l), ks.ds_mla_latent(ds_mla)});
  if (ks.hybrid())
    for (int64_t l = 0; l < ks.num_layers; ++l) {
      layers[static_cast<size_t>(l)].raw = storage->raw(l);
      layers[static_cast<size_t>(l)].raw_block_bytes =
          spec.layer_block_bytes[static_cast<size_t>(l)];
    }
  // Per-sequence state (DeepSeek-V4): one zero-filled slot per sequence.
  std::vector<int32_t> state_slots;
  if (ks.has_state()) {
    if (Status s = model.allocate_state(batch, kv_dtype, &backend.allocator()); !s.ok()) {
      std::fprintf(stderr, "strata bench latency: %s\n", s.to_string().c_str());
      return 1;
    }
    for (int64_t s = 0; s < batch; ++s) state_slots.push_back(static_cast<int32_t>(s));
  }
  std::vector<int32_t> tables(batch * blocks_per_seq);
  for (int64_t i = 0; i < batch * blocks_per_seq; ++i) tables[i] = static_cast<int32_t>(i + 1);

  Rng rng(lo.seed + 1);
  std::vector<std::vector<int32_t>> prompts(batch);
  for (auto& p : prompts)
    for (int64_t i = 0; i < in_len; ++i)
      p.push_back(static_cast<int32_t>(rng.below(cfg.vocab_size)));

  const KernelOps& fast_ops = backend.ops();
  const KernelOps* ops_in_use = &fast_ops;
  std::vector<float> logits(batch * cfg.vocab_size);
  // Runs one forward for the tokens [start, start+n) of each sequence.
  auto forward = [&](int64_t start, int64_t n, const std::vector<int32_t>& next) -> Status {
    std::vector<int32_t> ids, pos, qs = {0}, lens, rows;
    std::vector<int64_t> slots;
    for (int64_t s = 0; s < batch; ++s) {
      for (int64_t t = start; t < start + n; ++t) {
        ids.push_back(t < prompt_end ? prompts[s][t] : next[s]);
        pos.push_back(static_cast<int32_t>(t));
        slots.push_back(int64_t{tables[s * blocks_per_seq + t / block]} * block + t % block);
      }
      qs.push_back(static_cast<int32_t>(ids.size()));
      lens.push_back(static_cast<int32_t>(start + n));
      rows.push_back(qs.back() - 1);
    }
    ForwardBatch b{ids, pos, slots, qs, lens, tables, blocks_per_seq, rows};
    b.state_slots = state_slots;
    return model.forward(b, layers, *ops_in_use, logits.data());
  };

  const int64_t per_chunk = std::max<int64_t>(1, chunk / batch);
  // One prefill of every prompt, then out_len - 1 greedy decode steps; returns the seconds each
  // took (with profiling ops, the prefill's op times are kept in prefill_profile and the totals
  // reset before the decode steps).
  std::vector<OpTime> prefill_profile;
  auto run_once = [&](double* prefill, double* decode) -> Status {
    reset_op_times();
    Stopwatch sw;
    for (int64_t start = 0; start < prompt_end; start += per_chunk) {
      STRATA_RETURN_IF_ERROR(forward(start, std::min(per_chunk, prompt_end - start), {}));
    }
    *prefill = sw.elapsed();
    prefill_profile = op_times();
    reset_op_times();
    std::vector<int32_t> next(batch);
    sw.reset();
    // After a prefill, out_len - 1 steps (the prefill gave the first token); at a context,
    // out_len steps from a random token.
    const int64_t steps = at_context ? out_len : out_len - 1;
    for (int64_t t = 0; t < steps; ++t) {
      for (int64_t s = 0; s < batch; ++s)
        next[s] =
            at_context && t == 0
                ? prompts[s][0]
                : static_cast<int32_t>(std::max_element(logits.begin() + s * cfg.vocab_size,
                                                        logits.begin() + (s + 1) * cfg.vocab_size) -
                                       (logits.begin() + s * cfg.vocab_size));
      STRATA_RETURN_IF_ERROR(forward(decode_start + t, 1, next));
    }
    *decode = sw.elapsed();
    return Status();
  };
  // The read bandwidth is sampled between the iterations (two passes after each), so the decode
  // steps and the bandwidth they are compared with see the same machine.
  ReadBandwidthMeter meter(pool, args.get_int("bandwidth-mib") << 20);
  double best_prefill = 1e30, best_decode = 1e30;
  for (int64_t it = 0; it < args.get_int("num-iters-warmup") + args.get_int("num-iters"); ++it) {
    double prefill = 0, decode = 0;
    Status s = run_once(&prefill, &decode);
    if (!s.ok()) {
      std::fprintf(stderr, "strata bench latency: %s\n", s.to_string().c_str());
      return 1;
    }
    if (it >= args.get_int("num-iters-warmup")) {
      best_prefill = std::min(best_prefill, prefill);
      best_decode = std::min(best_decode, decode);
    }
    meter.pass();
    meter.pass();
  }
  while (meter.passes() < 5) meter.pass();
  double profiled_prefill = 0, profiled_decode = 0;
  std::vector<OpTime> profile;
  if (args.get_bool("profile")) {
    ops_in_use = &profiling_ops(fast_ops);
    Status s = run_once(&profiled_prefill, &profiled_decode);
    ops_in_use = &fast_ops;
    if (!s.ok()) {
      std::fprintf(stderr, "strata bench latency: %s\n", s.to_string().c_str());
      return 1;
    }
    profile = op_times();
  }
  const double bw = meter.best();
  const double peak = measure_fma_peak(pool);
  const double prefill_tps = batch * in_len / best_prefill;
  const int64_t decode_steps = std::max<int64_t>(1, at_context ? out_len : out_len - 1);
  const double steps_per_s = decode_steps / best_decode;
  const double decode_tps = batch * steps_per_s;
  const double util = model.weight_bytes_per_token() * steps_per_s / bw;
  std::printf(
      "kernels: %s (%s; CPU: %s), threads: %d, batch size: %lld, %s: %lld, "
      "output len: %lld\n",
      backend.variant().name.c_str(), backend.name().c_str(), cpu_features_string().c_str(),
      pool.size(), static_cast<long long>(batch), at_context ? "context len" : "input len",
      static_cast<long long>(decode_start), static_cast<long long>(out_len));
  if (at_context)
    std::printf("context: %lld tokens (no prefill: zero-filled KV blocks and state)\n",
                static_cast<long long>(context));
  else
    std::printf("prefill: %.1f tokens/s (%.1f ms for %lld tokens)\n", prefill_tps,
                best_prefill * 1e3, static_cast<long long>(batch * in_len));
  std::printf("decode: %.1f tokens/s (%.2f ms per step)\n", decode_tps, 1e3 / steps_per_s);
  std::printf("weight bytes per decode step: %s\n",
              format_bytes(model.weight_bytes_per_token()).c_str());
  const char* kv_kind = ds_mla ? "fp8_ds_mla" : dtype_name(kv_dtype);
  // What one sequence holds at decode_start tokens, and what one decode token reads there.
  const int64_t ctx_blocks = (decode_start + block - 1) / block;
  int64_t held = 0;
  if (ks.hybrid()) {
    held = ctx_blocks * storage->block_bytes() +
           (ks.has_state() ? ks.state_bytes_per_slot(kv_dtype) : 0);
    std::printf("KV bytes per block of %lld tokens: %lld (%s, hybrid layout)%s\n",
                static_cast<long long>(block), static_cast<long long>(storage->block_bytes()),
                kv_kind,
                ks.has_state() ? (", per-sequence state " +
                                  std::to_string(ks.state_bytes_per_slot(kv_dtype)) + " bytes")
                                     .c_str()
                               : "");
  } else {
    held = decode_start * ks.bytes_per_token(kv_dtype, ds_mla);
    std::printf("KV bytes per token: %lld (%s)\n",
                static_cast<long long>(ks.bytes_per_token(kv_dtype, ds_mla)), kv_kind);
  }
  if (ks.describe)
    std::printf("KV layout: %s\n", ks.describe(kv_dtype, block, decode_start).c_str());
  const int64_t read = ks.decode_read_bytes ? ks.decode_read_bytes(kv_dtype, decode_start) : held;
  std::printf(
      "KV bytes at %lld tokens of context: %s held per sequence, %s read per decode token%s\n",
      static_cast<long long>(decode_start), format_bytes(static_cast<double>(held)).c_str(),
      format_bytes(static_cast<double>(read)).c_str(),
      !ks.decode_read_bytes && ks.hybrid() ? " (upper bound: all held)" : "");
  std::printf("measured read bandwidth: %.2f GB/s (best of %d passes between the iterations)\n",
              bw / 1e9, meter.passes());
  if (batch == 1) {
    std::printf("decode bandwidth utilisation = %.3f\n", util);
  } else {
    // A batch shares each weight read among its rows (and an MoE batch reads more experts than
    // one token does): decode is judged by compute below, not by bandwidth.
    std::printf("decode bandwidth utilisation: not shown for batch size > 1 (see compute)\n");
  }
  if (!profile.empty()) {
    // Where the profiled run's time went, per kernel op; "rest" is what no kernel op covers
    // (embedding, residual adds, the argmax between steps, the forward's own bookkeeping).
    auto print_profile = [](const std::vector<OpTime>& ops, double total, int64_t steps,
                            const char* per) {
      double covered = 0;
      for (const OpTime& t : ops) {
        if (t.calls == 0) continue;
        covered += t.seconds;
        std::printf("  %-10s %8.3f ms %s (%4.1f%%), %5.1f calls %s", t.name,
                    t.seconds / steps * 1e3, per, 100 * t.seconds / total,
                    static_cast<double>(t.calls) / steps, per);
        if (t.weight_bytes > 0 && std::string(t.name) == "gemv")  // gemm re-reads its weights
          std::printf(", %.2f GB/s of weights", t.weight_bytes / t.seconds / 1e9);
        std::printf("\n");
      }
      std::printf("  %-10s %8.3f ms %s (%4.1f%%)\n", "rest", (total - covered) / steps * 1e3, per,
                  100 * (total - covered) / total);
    };
    if (!at_context) {
      std::printf("prefill profile (one more run, %.1f ms):\n", profiled_prefill * 1e3);
      print_profile(prefill_profile, profiled_prefill, 1, "in all");
    }
    std::printf("decode step profile (the same run, %.2f ms per step):\n",
                profiled_decode / decode_steps * 1e3);
    print_profile(profile, profiled_decode, decode_steps, "per step");
  }
  if (peak > 0) {
    // Decode step t: every sequence's new token attends to in_len + t + 1 positions.
    const double ctx_sum =
        decode_steps * (decode_start + 1.0) + decode_steps * (decode_steps - 1) / 2.0;
    const double dflops = model.forward_flops(
        batch * decode_steps, static_cast<int64_t>(batch * ctx_sum), batch * decode_steps);
    // Prefill: every prompt token attends to the tokens before it (sum of 1..in_len per sequence).
    const double flops =
        model.forward_flops(batch * in_len, batch * in_len * (in_len + 1) / 2, batch);
    std::printf("measured f32 FMA peak: %.1f GFLOP/s (%d threads)\n", peak / 1e9, pool.size());
    std::printf("decode compute utilisation = %.3f (%.1f GFLOP/s)\n", dflops / best_decode / peak,
                dflops / best_decode / 1e9);
    if (!at_context)
      std::printf("prefill compute utilisation = %.3f (%.1f GFLOP/s of %.2f GFLOP per prefill)\n",
                  flops / best_prefill / peak, flops / best_prefill / 1e9, flops / 1e9);
  }
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchLatency, "bench latency", "MODEL [options]",
                        "Prefill/decode speed and decode bandwidth utilisation of one batch",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
