#include "kernels/op_profile.h"

#include <atomic>
#include <chrono>

#include "kernels/dsv4.h"
#include "kernels/mla_impl.h"

namespace strata {
namespace {

enum Op {
  kGemv,
  kGemm,
  kAttention,
  kMlaAttention,
  kRmsNorm,
  kSiluMul,
  kRope,
  kKvWrite,
  kDsaSelect,
  kMlaSparseAttention,
  kMxfp4Matmul,
  kDsv4IndexerScores,
  kDsv4Attention,
  kNumOps
};
constexpr const char* kNames[kNumOps] = {
    "gemv",         "gemm",         "attention",     "mla_attention", "rms_norm",
    "silu_mul",     "rope",         "kv_write",      "dsa_select",    "mla_sparse_attention",
    "mxfp4_matmul", "dsv4_indexer", "dsv4_attention"};

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

void dsa_select(const AttentionArgs& args, const float* weights, int64_t ldw, int64_t topk,
                int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                int64_t row_end) {
  Timed t(kDsaSelect);
  (inner().dsa_select != nullptr ? inner().dsa_select : kernels::dsa_select_portable)(
      args, weights, ldw, topk, selected, counts, pool, row_begin, row_end);
}

void mla_sparse_attention(const AttentionArgs& args, int64_t kv_lora_rank, const int32_t* selected,
                          int64_t topk, const int32_t* counts, ThreadPool& pool, int64_t row_begin,
                          int64_t row_end) {
  Timed t(kMlaSparseAttention);
  (inner().mla_sparse_attention != nullptr ? inner().mla_sparse_attention
                                           : kernels::mla_sparse_attention_portable)(
      args, kv_lora_rank, selected, topk, counts, pool, row_begin, row_end);
}

void mxfp4_matmul(const float* x, const uint8_t* packed, const uint8_t* scales, int64_t m,
                  int64_t n, int64_t k, float* y, ThreadPool* pool) {
  Timed t(kMxfp4Matmul, n * (k / 2) + n * (k / 32));
  strata::mxfp4_matmul(inner(), x, packed, scales, m, n, k, y, pool);
}

void dsv4_indexer_scores(const float* q, const float* w, int heads, int64_t dim, float scale,
                         const uint8_t* const* rows, int64_t n, float* scores) {
  Timed t(kDsv4IndexerScores);
  strata::dsv4_indexer_scores(inner(), q, w, heads, dim, scale, rows, n, scores);
}

void dsv4_attention(const float* q, int heads, int64_t dim, const float* kv, int64_t n,
                    const float* sinks, float scale, float* out) {
  Timed t(kDsv4Attention);
  strata::dsv4_attention(inner(), q, heads, dim, kv, n, sinks, scale, out);
}

void dsv4_unpack_fp8_row(const uint8_t* data, const uint8_t* scales, int64_t nope, int64_t rope,
                         float* out) {
  // Not timed: one row per call, thousands per step (the clock would cost more than the work).
  strata::dsv4_unpack_fp8_row(inner(), data, scales, nope, rope, out);
}

KernelOps g_table{"",
                  matmul,
                  rms_norm,
                  silu_mul,
                  rope,
                  kv_write,
                  attention,
                  mla_attention,
                  dsa_select,
                  mla_sparse_attention,
                  mxfp4_matmul,
                  dsv4_indexer_scores,
                  dsv4_attention,
                  dsv4_unpack_fp8_row};

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
