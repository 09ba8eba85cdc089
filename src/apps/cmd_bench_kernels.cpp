// strata bench matmul: GFLOP/s and weight-stream GB/s of one matmul shape per kernel variant.
// strata bench dsa: DeepSeek-V3.2's sparse-attention kernels (dsa_select, mla_sparse_attention),
// the plain versions against each SIMD variant, at one context length.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/fp8_ds_mla.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/mla.h"
#include "kernels/ops.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add_int("m", 1, "rows of x (tokens)");
  o.add_int("n", 2048, "output features (weight rows)");
  o.add_int("k", 768, "input features");
  o.add_string("dtype", "bf16",
               "weight storage: f32, f16, bf16, q8_0, fp8 (e4m3 with 128x128 block scales)");
  o.add_int("threads", ThreadPool::hardware_threads(), "compute threads");
  o.add_float("seconds", 1.0, "time to spend per variant");
}

int run(const Args& args) {
  const int64_t m = args.get_int("m"), n = args.get_int("n"), k = args.get_int("k");
  DType dt;
  const bool fp8 = args.get("dtype") == "fp8";
  if (fp8) {
    dt = DType::kF8E4M3;
  } else if (!parse_dtype(args.get("dtype"), &dt)) {
    std::fprintf(stderr, "unknown --dtype %s\n", args.get("dtype").c_str());
    return 2;
  }
  Rng rng(1);
  std::vector<float> wf(n * k), x(m * k), y(m * n);
  for (auto& v : wf) v = static_cast<float>(rng.normal() * 0.02);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  const PackedWeight::Fp8Part part{wf.data(), DType::kF32, n};
  auto w = fp8 ? PackedWeight::pack_fp8_rows(&part, 1, k, 128, 128)
               : PackedWeight::pack(wf.data(), DType::kF32, n, k, dt);
  if (!w.ok()) {
    std::fprintf(stderr, "%s\n", w.status().to_string().c_str());
    return 1;
  }
  ThreadPool pool(static_cast<int>(args.get_int("threads")));
  for (const KernelVariantInfo* v : supported_kernel_variants()) {
    const KernelOps& ops = v->ops();
    ops.matmul(x.data(), m, k, *w, y.data(), n, pool);  // warm up
    int iters = 0;
    Stopwatch sw;
    while (sw.elapsed() < args.get_float("seconds")) {
      ops.matmul(x.data(), m, k, *w, y.data(), n, pool);
      ++iters;
    }
    double s = sw.elapsed() / iters;
    std::printf(
        "%-9s m=%lld n=%lld k=%lld %s threads=%d: %.3f ms  %.1f GFLOP/s  %.2f GB/s weights\n",
        ops.name, static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
        dtype_name(dt), pool.size(), s * 1e3, 2.0 * m * n * k / s / 1e9, w->bytes() / s / 1e9);
  }
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchMatmul, "bench matmul", "[options]",
                        "Measure one matmul shape per kernel variant (GFLOP/s, GB/s)", add_options,
                        run);

void add_dsa_options(OptionSet& o) {
  o.add_int("context", 65536, "cached tokens of the one sequence");
  o.add_int("rows", 1, "query rows (1: a decode step), all at the end of the context");
  o.add_int("index-heads", 64, "indexer heads");
  o.add_int("index-dim", 128, "indexer head dim");
  o.add_int("topk", 2048, "positions each row attends to");
  o.add_int("heads", 128, "attention heads");
  o.add_int("kv-lora-rank", 512, "latent values per cached row");
  o.add_int("rope-dim", 64, "rotary key values per cached row");
  o.add_string("kv-dtype", "fp8_ds_mla",
               "cache: f32, bf16, fp8 (e4m3, row scales) or fp8_ds_mla (latent rows in the "
               "656-byte layout, indexer keys fp8)");
  o.add_string("threads", "1,2", "compute thread counts to measure, comma-separated");
  o.add_int("repeats", 3, "alternating runs per variant (the median is shown)");
}

// One paged one-head cache of `rows` rows of `dim` values (identity block table, block 64).
struct BenchCache {
  std::vector<std::byte> data;
  std::vector<float> row_scales;
  PagedKvLayer kv;
  BenchCache(DType dt, bool ds_mla, int64_t rows, int64_t dim, int64_t latent) {
    const int64_t row_bytes = ds_mla ? ds_mla_row_bytes(dim, latent) : dim * dtype_block_bytes(dt);
    data.assign(rows * row_bytes, std::byte{0});
    row_scales.assign(rows, 1.0f);
    kv.dtype = dt;
    kv.block_size = 64;
    kv.num_kv_heads = 1;
    kv.head_dim = dim;
    kv.k = data.data();
    kv.k_scale = kv.v_scale = 1.0f;
    kv.k_row_scale = dt == DType::kF8E4M3 && !ds_mla ? row_scales.data() : nullptr;
    kv.ds_mla_latent = ds_mla ? latent : 0;
    Rng rng(7);
    std::vector<float> v(4096 * dim);
    std::vector<int64_t> slots(4096);
    for (int64_t r0 = 0; r0 < rows; r0 += 4096) {
      const int64_t n = std::min<int64_t>(4096, rows - r0);
      for (auto& x : v) x = static_cast<float>(rng.normal());
      for (int64_t i = 0; i < n; ++i) slots[i] = r0 + i;
      mla_kv_write(v.data(), dim, v.data() + latent, dim, n, latent, slots.data(), kv);
    }
  }
};

double median3(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run_dsa(const Args& args) {
  const int64_t ctx = args.get_int("context"), rows = args.get_int("rows");
  const int64_t ih = args.get_int("index-heads"), id = args.get_int("index-dim");
  const int64_t topk = args.get_int("topk"), H = args.get_int("heads");
  const int64_t r = args.get_int("kv-lora-rank"), D = r + args.get_int("rope-dim");
  const std::string kvd = args.get("kv-dtype");
  const bool ds_mla = kvd == "fp8_ds_mla";
  DType dt = DType::kF8E4M3;
  if (!ds_mla && kvd != "fp8" && !parse_dtype(kvd, &dt)) {
    std::fprintf(stderr, "unknown --kv-dtype %s (f32, bf16, fp8, fp8_ds_mla)\n", kvd.c_str());
    return 2;
  }
  auto threads = parse_int_list(args.get("threads"));
  if (!threads.ok() || rows < 1 || rows > ctx || ctx < 1 || topk < 1) {
    std::fprintf(stderr, "--threads takes counts like 1,2; --rows 1..--context; --topk > 0\n");
    return 2;
  }
  const int64_t blocks = (ctx + 63) / 64;
  BenchCache keys(dt, false, blocks * 64, id, 1);
  BenchCache latent(dt, ds_mla, blocks * 64, D, r);
  std::vector<int32_t> table(blocks), query_start = {0, static_cast<int32_t>(rows)},
                                      seq_lens = {static_cast<int32_t>(ctx)};
  for (int64_t b = 0; b < blocks; ++b) table[b] = static_cast<int32_t>(b);
  Rng rng(3);
  std::vector<float> iq(rows * ih * id), iw(rows * ih), q(rows * H * D), out(rows * H * r);
  for (auto& x : iq) x = static_cast<float>(rng.normal() * 0.1);
  for (auto& x : iw) x = static_cast<float>(rng.normal());
  for (auto& x : q) x = static_cast<float>(rng.normal() * 0.05);
  std::vector<int32_t> sel(rows * topk), counts(rows);
  const int64_t max_threads = *std::max_element(threads->begin(), threads->end());
  const int64_t per = std::max(dsa_select_scratch_floats(id, ctx),
                               mla_attention_scratch_floats(static_cast<int>(H), D, r, topk));
  std::vector<float> scratch(per * max_threads);
  auto base_args = [&](const PagedKvLayer& kv) {
    AttentionArgs a;
    a.kv = &kv;
    a.num_seqs = 1;
    a.query_start = query_start.data();
    a.seq_lens = seq_lens.data();
    a.block_tables = table.data();
    a.max_blocks_per_seq = blocks;
    a.scratch = scratch.data();
    a.scratch_floats_per_thread = per;
    return a;
  };
  AttentionArgs sa = base_args(keys.kv);
  sa.q = iq.data();
  sa.ldq = ih * id;
  sa.num_heads = static_cast<int>(ih);
  AttentionArgs ma = base_args(latent.kv);
  ma.q = q.data();
  ma.ldq = H * D;
  ma.out = out.data();
  ma.ldo = H * r;
  ma.num_heads = static_cast<int>(H);
  ma.scale = 0.07f;
  // The plain versions (the portable table's), then each SIMD variant.
  std::vector<const KernelOps*> variants = {&kernel_ops("portable")};
  for (const KernelVariantInfo* v : supported_kernel_variants())
    if (v->name != "portable") variants.push_back(&v->ops());
  std::printf(
      "context %lld, %lld row(s), indexer %lldx%lld, top-k %lld, %lld heads x (%lld + %lld),"
      " cache %s\n",
      static_cast<long long>(ctx), static_cast<long long>(rows), static_cast<long long>(ih),
      static_cast<long long>(id), static_cast<long long>(topk), static_cast<long long>(H),
      static_cast<long long>(r), static_cast<long long>(D - r), kvd.c_str());
  for (int64_t nt : *threads) {
    ThreadPool pool(static_cast<int>(nt));
    std::vector<std::vector<double>> t_sel(variants.size()), t_att(variants.size());
    const int repeats = static_cast<int>(std::max<int64_t>(1, args.get_int("repeats")));
    for (int rep = 0; rep < repeats; ++rep) {
      for (size_t v = 0; v < variants.size(); ++v) {  // alternating: every variant per round
        Stopwatch sw;
        dsa_select(*variants[v], sa, iw.data(), ih, topk, sel.data(), counts.data(), pool, 0, rows);
        t_sel[v].push_back(sw.elapsed());
        Stopwatch sw2;
        mla_sparse_attention(*variants[v], ma, r, sel.data(), topk, counts.data(), pool, 0, rows);
        t_att[v].push_back(sw2.elapsed());
      }
    }
    for (int k = 0; k < 2; ++k) {
      const auto& t = k == 0 ? t_sel : t_att;
      std::printf("%-20s threads=%lld:", k == 0 ? "dsa_select" : "mla_sparse_attention",
                  static_cast<long long>(nt));
      const double base = median3(t[0]);
      for (size_t v = 0; v < variants.size(); ++v) {
        const double m = median3(t[v]);
        std::printf("  %s %.2f ms", v == 0 ? "plain" : variants[v]->name, m * 1e3);
        if (v > 0) std::printf(" (%.1fx)", base / m);
      }
      std::printf("\n");
    }
  }
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchDsa, "bench dsa", "[options]",
                        "Time DeepSeek-V3.2's sparse-attention kernels, plain against SIMD",
                        add_dsa_options, run_dsa);

}  // namespace
}  // namespace strata::apps
