// strata bench dsv4: DeepSeek-V4's kernels (kernels/dsv4.h) - the MXFP4 expert matmul, the
// lightning indexer's scores over fp8 keys and the sparse attention of one decode token - the
// plain versions against each SIMD variant this CPU runs, alternating, medians.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/rng.h"
#include "kernels/backend.h"
#include "kernels/dsv4.h"
#include "kernels/ops.h"

namespace strata::apps {
namespace {

void add_options(OptionSet& o) {
  o.add_int("m", 1, "mxfp4_matmul: tokens (rows of x)");
  o.add_int("n", 3072, "mxfp4_matmul: output features (V4-Pro's moe_intermediate_size)");
  o.add_int("k", 7168, "mxfp4_matmul: input features, a multiple of 32 (V4-Pro's hidden_size)");
  o.add_int("context", 65536, "indexer: cached tokens (scores context / 4 compressed keys)");
  o.add_int("index-heads", 64, "indexer heads");
  o.add_int("index-dim", 128, "indexer head dim");
  o.add_int("heads", 128, "attention heads (V4-Pro 128, V4-Flash 64)");
  o.add_int("head-dim", 512, "attention K=V head dim");
  o.add_int("rows", 1152, "attention rows per token (window 128 + top-k 1024)");
  o.add_string("threads", "1,2", "mxfp4_matmul thread counts, comma-separated");
  o.add_int("repeats", 3, "alternating runs per variant (the median is shown)");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times fn(ops) per variant, alternating, `repeats` rounds; prints one line.
template <typename Fn>
void measure(const char* what, const std::vector<const KernelOps*>& variants, int repeats,
             Fn&& fn) {
  std::vector<std::vector<double>> t(variants.size());
  for (size_t v = 0; v < variants.size(); ++v) fn(*variants[v]);  // warm up
  for (int rep = 0; rep < repeats; ++rep)
    for (size_t v = 0; v < variants.size(); ++v) {
      Stopwatch sw;
      fn(*variants[v]);
      t[v].push_back(sw.elapsed());
    }
  std::printf("%-28s", what);
  const double base = median(t[0]);
  for (size_t v = 0; v < variants.size(); ++v) {
    const double m = median(t[v]);
    std::printf("  %s %.3f ms", v == 0 ? "plain" : variants[v]->name, m * 1e3);
    if (v > 0) std::printf(" (%.1fx)", base / m);
  }
  std::printf("\n");
}

int run(const Args& args) {
  const int64_t m = args.get_int("m"), n = args.get_int("n"), k = args.get_int("k");
  const int64_t ctx = args.get_int("context"), ih = args.get_int("index-heads");
  const int64_t id = args.get_int("index-dim"), H = args.get_int("heads");
  const int64_t hd = args.get_int("head-dim"), rows = args.get_int("rows");
  const int repeats = static_cast<int>(std::max<int64_t>(1, args.get_int("repeats")));
  auto threads = parse_int_list(args.get("threads"));
  if (!threads.ok() || m < 1 || n < 1 || k < 32 || k % 32 != 0 || ctx < 4 || ih < 1 || id < 1 ||
      H < 1 || hd < 16 || hd % 16 != 0 || rows < 1) {
    std::fprintf(stderr,
                 "--threads takes counts like 1,2; --k a positive multiple of 32; --head-dim a "
                 "multiple of 16; the other sizes positive\n");
    return 2;
  }
  // The plain versions (the portable table has none of these kernels), then each SIMD variant.
  std::vector<const KernelOps*> variants = {&kernel_ops("portable")};
  for (const KernelVariantInfo* v : supported_kernel_variants())
    if (v->name != "portable") variants.push_back(&v->ops());

  Rng rng(1);
  std::vector<uint8_t> packed(n * k / 2), scales(n * k / 32);
  for (auto& b : packed) b = static_cast<uint8_t>(rng.next_u64());
  for (auto& s : scales) s = static_cast<uint8_t>(120 + rng.next_u64() % 8);
  std::vector<float> x(m * k), y(m * n);
  for (auto& v : x) v = static_cast<float>(rng.normal());
  const double wbytes = static_cast<double>(packed.size() + scales.size());
  std::printf("mxfp4_matmul m=%lld n=%lld k=%lld (%.1f MB of weights)\n", static_cast<long long>(m),
              static_cast<long long>(n), static_cast<long long>(k), wbytes / 1e6);
  for (int64_t nt : *threads) {
    ThreadPool pool(static_cast<int>(nt));
    const std::string what = "  threads=" + std::to_string(nt);
    measure(what.c_str(), variants, repeats, [&](const KernelOps& ops) {
      mxfp4_matmul(ops, x.data(), packed.data(), scales.data(), m, n, k, y.data(), &pool);
    });
  }

  // Indexer keys as the engine's fp8 cache holds them: id e4m3 bytes then an f32 scale.
  const int64_t nkeys = ctx / 4, row_bytes = id + 4;
  std::vector<uint8_t> keys(nkeys * row_bytes);
  std::vector<const uint8_t*> key_rows(nkeys);
  for (int64_t r = 0; r < nkeys; ++r) {
    uint8_t* row = keys.data() + r * row_bytes;
    for (int64_t i = 0; i < id; ++i)
      row[i] = f32_to_fp8_e4m3(static_cast<float>(rng.normal() * 100.0));
    const float s = 0.01f;
    std::memcpy(row + id, &s, 4);
    key_rows[r] = row;
  }
  std::vector<float> iq(ih * id), iw(ih), scores(nkeys);
  for (auto& v : iq) v = static_cast<float>(rng.normal());
  for (auto& v : iw) v = static_cast<float>(rng.normal());
  std::printf("dsv4_indexer_scores: %lld fp8 keys (context %lld), %lld heads x %lld, 1 thread\n",
              static_cast<long long>(nkeys), static_cast<long long>(ctx),
              static_cast<long long>(ih), static_cast<long long>(id));
  measure("  one query", variants, repeats, [&](const KernelOps& ops) {
    dsv4_indexer_scores(ops, iq.data(), iw.data(), static_cast<int>(ih), id, 0.01f, key_rows.data(),
                        nkeys, scores.data());
  });

  std::vector<float> q(H * hd), kv(rows * hd), sinks(H), out(H * hd);
  for (auto& v : q) v = static_cast<float>(rng.normal());
  for (auto& v : kv) v = static_cast<float>(rng.normal());
  for (auto& v : sinks) v = static_cast<float>(rng.normal());
  std::printf("dsv4_attention: %lld heads x %lld over %lld rows, 1 thread\n",
              static_cast<long long>(H), static_cast<long long>(hd), static_cast<long long>(rows));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  measure("  one token", variants, repeats, [&](const KernelOps& ops) {
    dsv4_attention(ops, q.data(), static_cast<int>(H), hd, kv.data(), rows, sinks.data(), scale,
                   out.data());
  });
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchDsv4, "bench dsv4", "[options]",
                        "Time DeepSeek-V4's kernels (MXFP4 matmul, indexer, sparse attention), "
                        "plain against SIMD",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
