// MLA: cache writes, dispatch, and the portable attention variant (plain C++, the same split of
// work as the AVX2 variant).
#include "kernels/mla.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/fp8_ds_mla.h"
#include "kernels/kernel_impl.h"
#include "kernels/mla_impl.h"

namespace strata {

void ds_mla_quantize_row(const float* row, int64_t row_dim, int64_t latent, std::byte* dst) {
  float tmp[kDsMlaGroup];
  std::byte* scales = dst + latent;
  for (int64_t g = 0; g < ds_mla_scale_count(latent); ++g) {
    const int64_t e0 = g * kDsMlaGroup, n = std::min(kDsMlaGroup, latent - e0);
    float amax = 0;
    for (int64_t e = 0; e < n; ++e) amax = std::max(amax, std::fabs(row[e0 + e]));
    const float scale = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
    for (int64_t e = 0; e < n; ++e) tmp[e] = row[e0 + e] / scale;
    quantize_row(DType::kF8E4M3, tmp, dst + e0, n);
    std::memcpy(scales + g * 4, &scale, 4);
  }
  quantize_row(DType::kBF16, row + latent, scales + 4 * ds_mla_scale_count(latent),
               row_dim - latent);
}

void ds_mla_dequantize_row(const std::byte* src, int64_t row_dim, int64_t latent, float scale,
                           float* out) {
  const std::byte* scales = src + latent;
  dequantize_row(DType::kF8E4M3, src, out, latent);
  for (int64_t g = 0; g < ds_mla_scale_count(latent); ++g) {
    float gs;
    std::memcpy(&gs, scales + g * 4, 4);
    const float f = gs * scale;
    const int64_t e0 = g * kDsMlaGroup, e1 = std::min(latent, e0 + kDsMlaGroup);
    for (int64_t e = e0; e < e1; ++e) out[e] *= f;
  }
  dequantize_row(DType::kBF16, scales + 4 * ds_mla_scale_count(latent), out + latent,
                 row_dim - latent);
  if (scale != 1.0f)
    for (int64_t e = latent; e < row_dim; ++e) out[e] *= scale;
}

void read_mla_row(const PagedKvLayer& kv, int64_t slot, float* out) {
  if (kv.ds_mla_latent > 0)
    ds_mla_dequantize_row(kv.k + slot * ds_mla_row_bytes(kv.head_dim, kv.ds_mla_latent),
                          kv.head_dim, kv.ds_mla_latent, kv.k_scale, out);
  else
    kernels::read_kv_row(kv, kv.k, slot, 0, kv.k_scale, out);
}

void mla_kv_write(const float* latent, int64_t ld_latent, const float* k_pe, int64_t ld_pe,
                  int64_t m, int64_t kv_lora_rank, const int64_t* slots, const PagedKvLayer& kv) {
  const int64_t D = kv.head_dim;
  STRATA_CHECK(kv.num_kv_heads == 1 && D > kv_lora_rank && D <= 2048)
      << "MLA cache rows of " << D << " values for a latent of " << kv_lora_rank;
  STRATA_CHECK(kv.ds_mla_latent == 0 || (kv.ds_mla_latent == kv_lora_rank && kv.k_scale == 1.0f))
      << "an fp8_ds_mla cache quantises " << kv.ds_mla_latent << " latent values with no extra "
      << "scale; the model writes " << kv_lora_rank;
  float row[2048];
  for (int64_t i = 0; i < m; ++i) {
    if (slots[i] < 0) continue;  // padding token: not cached
    std::memcpy(row, latent + i * ld_latent, kv_lora_rank * sizeof(float));
    std::memcpy(row + kv_lora_rank, k_pe + i * ld_pe, (D - kv_lora_rank) * sizeof(float));
    if (kv.ds_mla_latent > 0) {
      ds_mla_quantize_row(row, D, kv_lora_rank,
                          kv.k + slots[i] * ds_mla_row_bytes(D, kv_lora_rank));
      continue;
    }
    if (kv.dtype == DType::kF8E4M3) {
      // As for every fp8 cache row: value = e4m3 * row_scale * k_scale, row_scale = amax / 448.
      float amax = 0;
      for (int64_t e = 0; e < D; ++e) amax = std::max(amax, std::fabs(row[e]));
      const float rs =
          kv.k_row_scale != nullptr && amax > 0 ? amax / (kFp8E4M3Max * kv.k_scale) : 1.0f;
      if (kv.k_row_scale != nullptr) kv.k_row_scale[kv.row_index(slots[i], 0)] = rs;
      const float inv = 1.0f / (rs * kv.k_scale);
      if (inv != 1.0f)
        for (int64_t e = 0; e < D; ++e) row[e] *= inv;
    }
    quantize_row(kv.dtype, row, kv.k + kv.offset(slots[i], 0), D);
  }
}

int64_t mla_attention_scratch_floats(int num_heads, int64_t row_dim, int64_t kv_lora_rank,
                                     int64_t max_seq_len) {
  return kernels::mla_head_block_floats(kernels::kMlaHeadBlock, row_dim, kv_lora_rank, max_seq_len);
}

void mla_attention(const KernelOps& ops, const AttentionArgs& a, int64_t kv_lora_rank,
                   ThreadPool& pool, int64_t row_begin, int64_t row_end) {
  STRATA_CHECK(a.kv != nullptr && a.kv->num_kv_heads == 1 && a.kv->head_dim > kv_lora_rank)
      << "mla_attention needs a latent cache with one row of latent + rotary key per token";
  const int64_t rows = a.query_start[a.num_seqs];
  if (row_end < 0) row_end = rows;
  STRATA_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= rows)
      << "rows [" << row_begin << ", " << row_end << ") of " << rows;
  ops.mla_attention(a, kv_lora_rank, pool, row_begin, row_end);
}

namespace kernels {
namespace {

// Heads [h0, h0 + nb) of one query row of sequence s (its query at `q`, its output at `out`)
// over n cached positions: positions[k], or k when positions is null.
void attend_positions(const AttentionArgs& a, int64_t r, int s, const float* q, float* out,
                      const int32_t* positions, int64_t n, int h0, int nb, float* scratch) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  const int64_t stride = n + 8;
  float* scores = scratch;                       // [nb][n + 8]
  float* acc = scores + kMlaHeadBlock * stride;  // [nb][r]
  float* row = acc + kMlaHeadBlock * r;          // [D]
  auto position = [&](int64_t k) { return positions != nullptr ? positions[k] : k; };
  for (int64_t k = 0; k < n; ++k) {
    read_mla_row(kv, mla_slot(a, s, position(k)), row);
    for (int h = 0; h < nb; ++h) {
      const float* qh = q + (h0 + h) * D;
      float d = 0;
      for (int64_t e = 0; e < D; ++e) d += qh[e] * row[e];
      scores[h * stride + k] = d * a.scale;
    }
  }
  float sums[kMlaHeadBlock];
  for (int h = 0; h < nb; ++h) {
    float* sc = scores + h * stride;
    float mx = -INFINITY;
    for (int64_t k = 0; k < n; ++k) mx = std::max(mx, sc[k]);
    float sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      sc[k] = std::exp(sc[k] - mx);
      sum += sc[k];
    }
    sums[h] = sum;
    std::fill(acc + h * r, acc + (h + 1) * r, 0.0f);
  }
  for (int64_t k = 0; k < n; ++k) {
    read_mla_row(kv, mla_slot(a, s, position(k)), row);
    for (int h = 0; h < nb; ++h) {
      const float p = scores[h * stride + k];
      float* ac = acc + h * r;
      for (int64_t e = 0; e < r; ++e) ac[e] += p * row[e];
    }
  }
  for (int h = 0; h < nb; ++h) {
    float* o = out + (h0 + h) * r;
    const float inv = 1.0f / sums[h];
    for (int64_t e = 0; e < r; ++e) o[e] = acc[h * r + e] * inv;
  }
}

// Heads [h0, h0 + nb) of query row t (sequence s): its whole causal context.
void attend_heads(const AttentionArgs& a, int64_t r, int s, int64_t t, int64_t row_begin, int h0,
                  int nb, float* scratch) {
  const int64_t q1 = a.query_start[s + 1];
  const int64_t ctx = a.seq_lens[s] - (q1 - t) + 1;
  attend_positions(a, r, s, a.q + (t - row_begin) * a.ldq, a.out + (t - row_begin) * a.ldo, nullptr,
                   ctx, h0, nb, scratch);
}

}  // namespace

void mla_attention_portable(const AttentionArgs& a, int64_t r, ThreadPool& pool, int64_t row_begin,
                            int64_t row_end) {
  const int blocks = (a.num_heads + kMlaHeadBlock - 1) / kMlaHeadBlock;
  const int64_t items = (row_end - row_begin) * blocks;
  pool.parallel_for(items, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t t = row_begin + item / blocks;
      const int h0 = static_cast<int>(item % blocks) * kMlaHeadBlock;
      attend_heads(a, r, mla_sequence_of_row(a, t), t, row_begin, h0,
                   std::min(kMlaHeadBlock, a.num_heads - h0), scratch);
    }
  });
}

}  // namespace kernels
}  // namespace strata

namespace strata {

int64_t dsa_select_scratch_floats(int64_t head_dim, int64_t max_seq_len) {
  // scores [max_seq_len], positions [max_seq_len] (int32), up to 4 converted key rows, padding.
  return 2 * max_seq_len + 4 * head_dim + 64;
}

void dsa_key_write(const float* k, int64_t ldk, int64_t m, const int64_t* slots,
                   const PagedKvLayer& keys) {
  STRATA_CHECK(keys.k != nullptr && keys.head_dim > 1) << "no indexer-key cache to write";
  // A key row is a cache row like [latent | k_pe]: split it anywhere.
  mla_kv_write(k, ldk, k + 1, ldk, m, 1, slots, keys);
}

namespace kernels {

namespace {

constexpr int64_t kDsaKeyChunk = 1024;  // positions per work item when a row's keys are split

// The top-k of scores[0..ctx) (ctx > topk) into sel, ascending; order: ctx ints of scratch.
void dsa_top_k(const float* scores, int32_t* order, int64_t ctx, int64_t topk, int32_t* sel) {
  for (int64_t j = 0; j < ctx; ++j) order[j] = static_cast<int32_t>(j);
  // The top-k by score, the lower position first among equal scores (a total order: the
  // selection never depends on the sort's implementation).
  std::nth_element(order, order + topk - 1, order + ctx, [&](int32_t x, int32_t y) {
    return scores[x] > scores[y] || (scores[x] == scores[y] && x < y);
  });
  std::sort(order, order + topk);
  std::memcpy(sel, order, static_cast<size_t>(topk) * sizeof(int32_t));
}

}  // namespace

void dsa_select_with(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                     int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                     int64_t row_end, DsaScoreFn score) {
  auto context = [&](int64_t t, int* s) {
    *s = mla_sequence_of_row(a, t);
    return a.seq_lens[*s] - (a.query_start[*s + 1] - t) + 1;
  };
  auto thread_scratch = [&] {
    return a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
  };
  auto all_positions = [&](int64_t i, int64_t ctx) {
    for (int64_t j = 0; j < ctx; ++j) selected[i * topk + j] = static_cast<int32_t>(j);
    counts[i] = static_cast<int32_t>(ctx);
  };
  if (row_end - row_begin < pool.size()) {
    // Few rows (decode): one row at a time, its positions scored in parallel chunks into the
    // calling thread's scratch (scores, then positions), each worker converting keys in its own.
    for (int64_t i = 0; i < row_end - row_begin; ++i) {
      int s;
      const int64_t ctx = context(row_begin + i, &s);
      if (ctx <= topk) {
        all_positions(i, ctx);
        continue;
      }
      float* scores = thread_scratch();
      const float* q = a.q + i * a.ldq;
      const float* w = weights + i * ldw;
      pool.parallel_for(ctx, kDsaKeyChunk, [&](int64_t j0, int64_t j1) {
        float* own = thread_scratch();
        score(a, q, w, s, j0, j1, scores, own == scores ? own + 2 * ctx : own);
      });
      dsa_top_k(scores, reinterpret_cast<int32_t*>(scores + ctx), ctx, topk, selected + i * topk);
      counts[i] = static_cast<int32_t>(topk);
    }
    return;
  }
  pool.parallel_for(row_end - row_begin, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = thread_scratch();
    for (int64_t i = i0; i < i1; ++i) {
      int s;
      const int64_t ctx = context(row_begin + i, &s);
      if (ctx <= topk) {
        all_positions(i, ctx);
        continue;
      }
      score(a, a.q + i * a.ldq, weights + i * ldw, s, 0, ctx, scratch, scratch + 2 * ctx);
      dsa_top_k(scratch, reinterpret_cast<int32_t*>(scratch + ctx), ctx, topk, selected + i * topk);
      counts[i] = static_cast<int32_t>(topk);
    }
  });
}

namespace {

// Plain scores: per position one converted key row, per head one f32 dot product in order.
void dsa_scores_portable(const AttentionArgs& a, const float* q, const float* w, int s, int64_t j0,
                         int64_t j1, float* scores, float* key) {
  const PagedKvLayer& kv = *a.kv;
  const int64_t D = kv.head_dim;
  for (int64_t j = j0; j < j1; ++j) {
    read_mla_row(kv, mla_slot(a, s, j), key);  // read_kv_row, or an fp8_ds_mla row
    float score = 0;
    for (int h = 0; h < a.num_heads; ++h) {
      const float* qh = q + h * D;
      float d = 0;
      for (int64_t e = 0; e < D; ++e) d += qh[e] * key[e];
      score += w[h] * std::max(d, 0.0f);
    }
    scores[j] = score;
  }
}

}  // namespace

void dsa_select_portable(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                         int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                         int64_t row_end) {
  dsa_select_with(a, weights, ldw, topk, selected, counts, pool, row_begin, row_end,
                  dsa_scores_portable);
}

void mla_sparse_attention_portable(const AttentionArgs& a, int64_t r, const int32_t* selected,
                                   int64_t topk, const int32_t* counts, ThreadPool& pool,
                                   int64_t row_begin, int64_t row_end) {
  constexpr int hb = kMlaHeadBlock;
  const int blocks = (a.num_heads + hb - 1) / hb;
  pool.parallel_for((row_end - row_begin) * blocks, 1, [&](int64_t i0, int64_t i1) {
    float* scratch = a.scratch + ThreadPool::current_thread_index() * a.scratch_floats_per_thread;
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t i = item / blocks, t = row_begin + i;
      const int h0 = static_cast<int>(item % blocks) * hb;
      const int nb = std::min(hb, a.num_heads - h0);
      const int s = mla_sequence_of_row(a, t);
      attend_positions(a, r, s, a.q + i * a.ldq, a.out + i * a.ldo, selected + i * topk, counts[i],
                       h0, nb, scratch);
    }
  });
}

}  // namespace kernels

namespace {

void check_dsa_select(const AttentionArgs& a, int64_t topk, int64_t row_begin, int64_t row_end) {
  STRATA_CHECK(a.kv != nullptr && a.kv->num_kv_heads == 1 && a.kv->k != nullptr && topk > 0)
      << "dsa_select needs the indexer-key cache and a positive top-k";
  STRATA_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= a.query_start[a.num_seqs])
      << "dsa_select rows [" << row_begin << ", " << row_end << ") of "
      << a.query_start[a.num_seqs];
}

void check_sparse(const AttentionArgs& a, int64_t r, int64_t row_begin, int64_t row_end) {
  STRATA_CHECK(a.kv != nullptr && a.kv->num_kv_heads == 1 && a.kv->head_dim > r)
      << "mla_sparse_attention needs a latent cache with one row of latent + rotary key per token";
  STRATA_CHECK(0 <= row_begin && row_begin <= row_end && row_end <= a.query_start[a.num_seqs])
      << "mla_sparse_attention rows [" << row_begin << ", " << row_end << ") of "
      << a.query_start[a.num_seqs];
}

}  // namespace

void dsa_select(const KernelOps& ops, const AttentionArgs& a, const float* weights, int64_t ldw,
                int64_t topk, int32_t* selected, int32_t* counts, ThreadPool& pool,
                int64_t row_begin, int64_t row_end) {
  check_dsa_select(a, topk, row_begin, row_end);
  (ops.dsa_select != nullptr ? ops.dsa_select : kernels::dsa_select_portable)(
      a, weights, ldw, topk, selected, counts, pool, row_begin, row_end);
}

void dsa_select(const AttentionArgs& a, const float* weights, int64_t ldw, int64_t topk,
                int32_t* selected, int32_t* counts, ThreadPool& pool, int64_t row_begin,
                int64_t row_end) {
  check_dsa_select(a, topk, row_begin, row_end);
  kernels::dsa_select_portable(a, weights, ldw, topk, selected, counts, pool, row_begin, row_end);
}

void mla_sparse_attention(const KernelOps& ops, const AttentionArgs& a, int64_t r,
                          const int32_t* selected, int64_t topk, const int32_t* counts,
                          ThreadPool& pool, int64_t row_begin, int64_t row_end) {
  check_sparse(a, r, row_begin, row_end);
  (ops.mla_sparse_attention != nullptr ? ops.mla_sparse_attention
                                       : kernels::mla_sparse_attention_portable)(
      a, r, selected, topk, counts, pool, row_begin, row_end);
}

void mla_sparse_attention(const AttentionArgs& a, int64_t r, const int32_t* selected, int64_t topk,
                          const int32_t* counts, ThreadPool& pool, int64_t row_begin,
                          int64_t row_end) {
  check_sparse(a, r, row_begin, row_end);
  kernels::mla_sparse_attention_portable(a, r, selected, topk, counts, pool, row_begin, row_end);
}

}  // namespace strata
