#include "kernels/op_profile.h"

#include <atomic>
#include <chrono>

namespace strata {
namespace {

enum Op { kGemv, kGemm, kAttention, kMlaAttention, kRmsNorm, kSiluMul, kRope, kKvWrite, kNumOps };
constexpr const char* kNames[kNumOps] = {"gemv",     "gemm",     "attention", "mla_attention",
                                         "rms_norm", "silu_mul", "rope",      "kv_write"};

struct Counter {
  std::atomic<int64_t> calls{0}, nanos{0}, bytes{0};
};
Counter g_counters[kNumOps];
std::atomic<const KernelOps*> g_inner{nullptr};

const KernelOps& inner() {
  return *g_inner.load(std::memory_order_acquire);
}

class Timed {
 public:
  explicit Timed(Op op, int64_t bytes = 0)
      : op_(op), bytes_(bytes), start_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start_)
                        .count();
    Counter& c = g_counters[op_];
    c.calls.fetch_add(1, std::memory_order_relaxed);
    c.nanos.fetch_add(ns, std::memory_order_relaxed);
    c.bytes.fetch_add(bytes_, std::memory_order_relaxed);
  }
  Timed(const Timed&) = delete;
  Timed& operator=(const Timed&) = delete;

 private:
  Op op_;
  int64_t bytes_;
  std::chrono::steady_clock::time_point start_;
};

void matmul(const float* x, int64_t m, int64_t ldx, const PackedWeight& w, float* y, int64_t ldy,
            ThreadPool& pool) {
  Timed t(m <= 4 ? kGemv : kGemm, w.bytes());
  inner().matmul(x, m, ldx, w, y, ldy, pool);
}

void rms_norm(const float* x, int64_t ldx, const float* weight, float eps, int64_t m, int64_t n,
              float* y, int64_t ldy, ThreadPool& pool) {
  Timed t(kRmsNorm);
  inner().rms_norm(x, ldx, weight, eps, m, n, y, ldy, pool);
}

void silu_mul(const float* gu, int64_t ldgu, int64_t m, int64_t f_dim, float* out, int64_t ldo,
              ThreadPool& pool) {
  Timed t(kSiluMul);
  inner().silu_mul(gu, ldgu, m, f_dim, out, ldo, pool);
}

void rope(float* x, int64_t m, int64_t ld, int num_heads, int head_dim, int rot_dim,
          const float* cos, const float* sin, bool neox) {
  Timed t(kRope);
  inner().rope(x, m, ld, num_heads, head_dim, rot_dim, cos, sin, neox);
}

void kv_write(const float* k, int64_t ldk, const float* v, int64_t ldv, int64_t m,
              const int64_t* slots, const PagedKvLayer& kv) {
  Timed t(kKvWrite);
  inner().kv_write(k, ldk, v, ldv, m, slots, kv);
}

void attention(const AttentionArgs& args, ThreadPool& pool) {
  Timed t(kAttention);
  inner().attention(args, pool);
}

void mla_attention(const AttentionArgs& args, int64_t kv_lora_rank, ThreadPool& pool,
                   int64_t row_begin, int64_t row_end) {
  Timed t(kMlaAttention);
  inner().mla_attention(args, kv_lora_rank, pool, row_begin, row_end);
}

KernelOps g_table{"", matmul, rms_norm, silu_mul, rope, kv_write, attention, mla_attention};

}  // namespace

const KernelOps& profiling_ops(const KernelOps& in) {
  g_inner.store(&in, std::memory_order_release);
  g_table.name = in.name;
  return g_table;
}

std::vector<OpTime> op_times() {
  std::vector<OpTime> out;
  for (int i = 0; i < kNumOps; ++i) {
    const Counter& c = g_counters[i];
    out.push_back({kNames[i], c.calls.load(), static_cast<double>(c.nanos.load()) * 1e-9,
                   static_cast<double>(c.bytes.load())});
  }
  return out;
}

void reset_op_times() {
  for (Counter& c : g_counters) {
    c.calls.store(0);
    c.nanos.store(0);
    c.bytes.store(0);
  }
}

}  // namespace strata
