// strata bench matmul: GFLOP/s and weight-stream GB/s of one matmul shape per kernel variant.
#include <cstdio>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/rng.h"
#include "kernels/backend.h"
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

}  // namespace
}  // namespace strata::apps
