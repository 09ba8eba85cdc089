// MLA attention over a paged latent cache: the fast variants of the absorbed form against the
// reference, the absorbed form against the expanded one (per-head keys and values rebuilt from
// the latents), token chunks, and the cache write (including fp8).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <iterator>

#include "core/fp8_ds_mla.h"
#include "kernel_test_util.h"
#include "kernels/mla.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

// Sequences with scrambled block tables, each with some cached context and a few query tokens.
struct MlaCase {
  int num_heads = 5;
  int64_t rank = 32, rope = 8, block_size = 4;
  DType dtype = DType::kF32;
  bool ds_mla = false;                    // the fp8_ds_mla layout (dtype is then fp8)
  std::vector<int32_t> ctx = {9, 1, 17};  // tokens already cached before this step
  std::vector<int32_t> new_tokens = {3, 1, 6};

  int64_t row() const { return rank + rope; }
  int64_t blocks_per_seq = 0;
  std::vector<std::byte> cache;
  std::vector<float> row_scales;  // fp8: one per cached row
  PagedKvLayer kv;
  std::vector<int32_t> query_start, seq_lens, tables;
  std::vector<int64_t> slots;
  std::vector<float> latent, k_pe;  // the rows written, [total, rank] and [total, rope]

  void build() {
    const int S = static_cast<int>(ctx.size());
    int64_t max_len = 0;
    for (int s = 0; s < S; ++s) max_len = std::max<int64_t>(max_len, ctx[s] + new_tokens[s]);
    blocks_per_seq = (max_len + block_size - 1) / block_size;
    const int64_t num_blocks = S * blocks_per_seq + 1;
    if (ds_mla) dtype = DType::kF8E4M3;
    const int64_t row_bytes =
        ds_mla ? ds_mla_row_bytes(row(), rank) : row() * dtype_block_bytes(dtype);
    cache.assign(num_blocks * block_size * row_bytes, std::byte{0});
    row_scales.assign(num_blocks * block_size, 0.0f);
    kv = {dtype,  block_size,   1,
          row(),  cache.data(), nullptr,
          1.0f,   1.0f,         dtype == DType::kF8E4M3 && !ds_mla ? row_scales.data() : nullptr,
          nullptr};
    if (ds_mla) kv.ds_mla_latent = rank;
    tables.resize(S * blocks_per_seq);
    for (int s = 0; s < S; ++s)
      for (int64_t b = 0; b < blocks_per_seq; ++b)
        tables[s * blocks_per_seq + b] = static_cast<int32_t>(1 + s + S * (blocks_per_seq - 1 - b));
    query_start = {0};
    for (int s = 0; s < S; ++s) {
      const int64_t len = ctx[s] + new_tokens[s];
      auto lat = random_vector(len * rank, 100 + s, 1.0f);
      auto pe = random_vector(len * rope, 200 + s, 1.0f);
      std::vector<int64_t> all_slots;
      for (int64_t j = 0; j < len; ++j)
        all_slots.push_back(int64_t{tables[s * blocks_per_seq + j / block_size]} * block_size +
                            j % block_size);
      mla_kv_write(lat.data(), rank, pe.data(), rope, len, rank, all_slots.data(), kv);
      query_start.push_back(query_start.back() + new_tokens[s]);
      seq_lens.push_back(static_cast<int32_t>(len));
    }
  }

  AttentionArgs args(const float* q, int64_t ldq, float* out, int64_t ldo) const {
    AttentionArgs a;
    a.q = q;
    a.ldq = ldq;
    a.out = out;
    a.ldo = ldo;
    a.num_heads = num_heads;
    a.scale = 0.3f;
    a.kv = &kv;
    a.num_seqs = static_cast<int>(ctx.size());
    a.query_start = query_start.data();
    a.seq_lens = seq_lens.data();
    a.block_tables = tables.data();
    a.max_blocks_per_seq = blocks_per_seq;
    return a;
  }
  int64_t num_queries() const { return query_start.back(); }
};

TEST(MlaAttention, FastVariantsMatchTheReference) {
  ThreadPool pool(3);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    for (int heads : {1, 5, 8}) {
      MlaCase c;
      c.dtype = dtype;
      c.num_heads = heads;
      c.build();
      const int64_t T = c.num_queries(), ldq = heads * c.row() + 3, ldo = heads * c.rank + 1;
      auto q = random_vector(T * ldq, 7, 0.5f);
      std::vector<float> want(T * ldo, -1.0f), got(T * ldo, -1.0f);
      mla_attention(reference_kernel_ops(), c.args(q.data(), ldq, want.data(), ldo), c.rank, pool);
      const int64_t per = mla_attention_scratch_floats(heads, c.row(), c.rank, 64);
      std::vector<float> scratch(per * pool.size());
      for (const std::string& v : fast_variants()) {
        std::fill(got.begin(), got.end(), -1.0f);
        AttentionArgs a = c.args(q.data(), ldq, got.data(), ldo);
        a.scratch = scratch.data();
        a.scratch_floats_per_thread = per;
        mla_attention(kernel_ops(v), a, c.rank, pool);
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t e = 0; e < heads * c.rank; ++e)
            ASSERT_NEAR(got[t * ldo + e], want[t * ldo + e], 2e-5)
                << v << " " << dtype_name(dtype) << " heads " << heads << " token " << t
                << " value " << e;
          ASSERT_EQ(got[t * ldo + heads * c.rank], -1.0f) << "wrote past the heads";
        }
      }
    }
  }
}

TEST(MlaAttention, TokenChunksGiveTheSameRows) {
  MlaCase c;
  c.build();
  ThreadPool pool(2);
  const int64_t T = c.num_queries(), ldq = c.num_heads * c.row(), ldo = c.num_heads * c.rank;
  auto q = random_vector(T * ldq, 8, 0.5f);
  const int64_t per = mla_attention_scratch_floats(c.num_heads, c.row(), c.rank, 64);
  std::vector<float> scratch(per * pool.size());
  for (const std::string& v : fast_variants()) {
    std::vector<float> all(T * ldo), parts(T * ldo);
    AttentionArgs a = c.args(q.data(), ldq, all.data(), ldo);
    a.scratch = scratch.data();
    a.scratch_floats_per_thread = per;
    mla_attention(kernel_ops(v), a, c.rank, pool);
    for (int64_t t0 = 0; t0 < T; t0 += 4) {
      const int64_t t1 = std::min(T, t0 + 4);
      AttentionArgs b = a;
      b.q = q.data() + t0 * ldq;
      b.out = parts.data() + t0 * ldo;
      mla_attention(kernel_ops(v), b, c.rank, pool, t0, t1);
    }
    ASSERT_EQ(std::memcmp(all.data(), parts.data(), all.size() * sizeof(float)), 0) << v;
  }
}

// Absorbed: q_lat = W_UK^T q_nope; attention over the latent rows; out = W_UV o_lat. Expanded:
// keys [W_UK c | k_pe], values W_UV c, ordinary attention. They must agree.
TEST(MlaAttention, AbsorbedFormEqualsExpandedForm) {
  ThreadPool pool(2);
  MlaCase c;
  c.num_heads = 3;
  c.build();
  const int64_t nope = 12, v_dim = 10, H = c.num_heads, r = c.rank, rope = c.rope;
  std::vector<PackedWeight> uk_t, uv;
  for (int64_t h = 0; h < H; ++h) {
    auto wk = random_vector(r * nope, 300 + h, 0.2f);   // W_UK^T [r, nope]
    auto wv = random_vector(v_dim * r, 400 + h, 0.2f);  // W_UV [v, r]
    uk_t.push_back(PackedWeight::pack(wk.data(), DType::kF32, r, nope, DType::kF32).value());
    uv.push_back(PackedWeight::pack(wv.data(), DType::kF32, v_dim, r, DType::kF32).value());
  }
  const int64_t T = c.num_queries(), qk = nope + rope;
  auto q = random_vector(T * H * qk, 9, 0.5f);  // per head [q_nope | q_pe]
  std::vector<float> expanded(T * H * v_dim);
  mla_attention_expanded_reference(c.args(q.data(), H * qk, expanded.data(), H * v_dim), r, uk_t,
                                   uv);
  for (const std::string& v : {"reference", "portable"}) {
    const KernelOps& ops = kernel_ops(v);
    std::vector<float> q_abs(T * H * c.row()), o_lat(T * H * r), absorbed(T * H * v_dim);
    for (int64_t h = 0; h < H; ++h) {
      ops.matmul(q.data() + h * qk, T, H * qk, uk_t[h], q_abs.data() + h * c.row(), H * c.row(),
                 pool);
      for (int64_t t = 0; t < T; ++t)
        std::memcpy(q_abs.data() + t * H * c.row() + h * c.row() + r,
                    q.data() + t * H * qk + h * qk + nope, rope * sizeof(float));
    }
    const int64_t per = mla_attention_scratch_floats(static_cast<int>(H), c.row(), r, 64);
    std::vector<float> scratch(per * pool.size());
    AttentionArgs a = c.args(q_abs.data(), H * c.row(), o_lat.data(), H * r);
    a.scratch = scratch.data();
    a.scratch_floats_per_thread = per;
    mla_attention(ops, a, r, pool);
    for (int64_t h = 0; h < H; ++h)
      ops.matmul(o_lat.data() + h * r, T, H * r, uv[h], absorbed.data() + h * v_dim, H * v_dim,
                 pool);
    double max_abs = 0;
    for (float x : expanded) max_abs = std::max(max_abs, double{std::fabs(x)});
    ASSERT_GT(max_abs, 0.05);
    for (size_t i = 0; i < expanded.size(); ++i)
      ASSERT_NEAR(absorbed[i], expanded[i], 1e-5 * (1 + max_abs)) << v << i;
  }
}

TEST(MlaKvWrite, StoresLatentThenRotaryKeyInTheCacheDtype) {
  const int64_t r = 16, rope = 8, D = r + rope, bs = 4;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    std::vector<std::byte> cache(3 * bs * D * dtype_block_bytes(dtype));
    std::vector<float> row_scales(3 * bs, 0.0f);
    PagedKvLayer kv{dtype, bs, 1, D, cache.data(), nullptr, 1.0f, 1.0f};
    if (dtype == DType::kF8E4M3) {
      kv.k_scale = 0.5f;
      kv.k_row_scale = row_scales.data();
    }
    auto lat = random_vector(3 * r, 1, 2.0f), pe = random_vector(3 * rope, 2, 20.0f);
    const int64_t slots[] = {9, -1, 4};
    mla_kv_write(lat.data(), r, pe.data(), rope, 3, r, slots, kv);
    for (int i : {0, 2}) {
      std::vector<float> row(D);
      dequantize_row(dtype, cache.data() + kv.offset(slots[i], 0), row.data(), D);
      float amax = 0;
      for (int64_t e = 0; e < D; ++e)
        amax = std::max(amax, std::fabs(e < r ? lat[i * r + e] : pe[i * rope + e - r]));
      const float rs = dtype == DType::kF8E4M3 ? row_scales[kv.row_index(slots[i], 0)] : 1.0f;
      if (dtype == DType::kF8E4M3) {
        EXPECT_FLOAT_EQ(rs * kv.k_scale * kFp8E4M3Max, amax);
      }
      for (int64_t e = 0; e < D; ++e) {
        const float want = e < r ? lat[i * r + e] : pe[i * rope + e - r];
        const float got = row[e] * rs * kv.k_scale;
        const float tol = dtype == DType::kF32 ? 0 : (dtype == DType::kBF16 ? 1e-2f : 0.07f);
        ASSERT_NEAR(got, want, tol * std::fabs(want) + amax * 1e-3f)
            << dtype_name(dtype) << " " << e;
      }
    }
    // The padding token's slot (-1) wrote nothing: block 0 slot 1 is still zero.
    std::vector<float> row(D);
    dequantize_row(dtype, cache.data() + kv.offset(1, 0), row.data(), D);
    for (float x : row) ASSERT_EQ(x, 0.0f);
  }
}

// ---- fp8_ds_mla rows (core/fp8_ds_mla.h) ----

// A row whose groups differ in magnitude (one all zero) so each group's scale matters.
std::vector<float> ds_row(int64_t latent, int64_t rope, uint64_t seed) {
  auto v = random_vector(latent + rope, seed, 1.0f);
  for (int64_t e = 0; e < latent; ++e) {
    const int64_t g = e / kDsMlaGroup;
    v[e] *= g == 1 ? 0.0f : std::ldexp(1.0f, static_cast<int>(3 * g) - 4);
  }
  for (int64_t e = latent; e < latent + rope; ++e) v[e] *= 30.0f;
  return v;
}

TEST(DsMlaRow, PublishedV32RowIs656Bytes) {
  EXPECT_EQ(ds_mla_scale_count(512), 4);
  EXPECT_EQ(ds_mla_row_bytes(512 + 64, 512), 512 + 16 + 128);
  EXPECT_EQ(ds_mla_row_bytes(512 + 64, 512), 656);
}

TEST(DsMlaRow, FastEqualsReferenceBitForBit) {
  for (auto [latent, rope] : {std::pair<int64_t, int64_t>{512, 64}, {130, 6}, {32, 8}}) {
    for (uint64_t seed : {1, 2, 3}) {
      const auto row = ds_row(latent, rope, seed);
      const int64_t n = ds_mla_row_bytes(latent + rope, latent);
      std::vector<std::byte> fast(n, std::byte{0x5a}), ref(n, std::byte{0xa5});
      ds_mla_quantize_row(row.data(), latent + rope, latent, fast.data());
      ds_mla_quantize_row_reference(row.data(), latent + rope, latent, ref.data());
      ASSERT_EQ(std::memcmp(fast.data(), ref.data(), n), 0) << latent << " seed " << seed;
      for (float scale : {1.0f, 0.5f}) {
        std::vector<float> a(latent + rope, -1), b(latent + rope, -2);
        ds_mla_dequantize_row(fast.data(), latent + rope, latent, scale, a.data());
        ds_mla_dequantize_row_reference(fast.data(), latent + rope, latent, scale, b.data());
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
            << latent << " scale " << scale;
      }
    }
  }
}

TEST(DsMlaRow, RoundTripWithinFp8PrecisionPerGroup) {
  const int64_t latent = 512, rope = 64, D = latent + rope;
  const auto row = ds_row(latent, rope, 9);
  std::vector<std::byte> packed(ds_mla_row_bytes(D, latent));
  ds_mla_quantize_row(row.data(), D, latent, packed.data());
  std::vector<float> back(D);
  ds_mla_dequantize_row(packed.data(), D, latent, 1.0f, back.data());
  for (int64_t g = 0; g < 4; ++g) {
    float amax = 0;
    for (int64_t e = g * 128; e < (g + 1) * 128; ++e) amax = std::max(amax, std::fabs(row[e]));
    float stored;
    std::memcpy(&stored, packed.data() + latent + 4 * g, 4);
    EXPECT_EQ(stored, amax > 0 ? amax / kFp8E4M3Max : 1.0f) << "group " << g;
    for (int64_t e = g * 128; e < (g + 1) * 128; ++e) {
      // e4m3: 3 mantissa bits (half a step: 2^-4 relative), subnormal steps of 2^-9 x scale.
      ASSERT_LE(std::fabs(back[e] - row[e]), std::fabs(row[e]) * 0x1p-4f + stored * 0x1p-10f + 0.0f)
          << "group " << g << " value " << e;
    }
    if (amax == 0)
      for (int64_t e = g * 128; e < (g + 1) * 128; ++e) ASSERT_EQ(back[e], 0.0f);
  }
  for (int64_t e = latent; e < D; ++e)  // the rotary key: bf16, 8 significant bits
    ASSERT_LE(std::fabs(back[e] - row[e]), std::fabs(row[e]) * 0x1p-8f) << e;
}

TEST(DsMlaRow, MlaKvWriteQuantisesAndReadMlaRowDequantises) {
  const int64_t r = 130, rope = 6, D = r + rope, bs = 4;
  const int64_t rb = ds_mla_row_bytes(D, r);
  std::vector<std::byte> cache(3 * bs * rb, std::byte{0});
  PagedKvLayer kv{DType::kF8E4M3, bs, 1, D, cache.data(), nullptr, 1.0f, 1.0f};
  kv.ds_mla_latent = r;
  std::vector<float> lat(3 * r), pe(3 * rope);
  for (int i = 0; i < 3; ++i) {
    const auto row = ds_row(r, rope, 20 + i);
    std::copy(row.begin(), row.begin() + r, lat.begin() + i * r);
    std::copy(row.begin() + r, row.end(), pe.begin() + i * rope);
  }
  const int64_t slots[] = {9, -1, 4};
  mla_kv_write(lat.data(), r, pe.data(), rope, 3, r, slots, kv);
  for (int i : {0, 2}) {
    std::vector<float> row(lat.begin() + i * r, lat.begin() + (i + 1) * r);
    row.insert(row.end(), pe.begin() + i * rope, pe.begin() + (i + 1) * rope);
    std::vector<std::byte> want(rb);
    ds_mla_quantize_row_reference(row.data(), D, r, want.data());
    ASSERT_EQ(std::memcmp(cache.data() + slots[i] * rb, want.data(), rb), 0) << i;
    std::vector<float> got(D), ref(D);
    read_mla_row(kv, slots[i], got.data());
    ds_mla_dequantize_row_reference(want.data(), D, r, 1.0f, ref.data());
    ASSERT_EQ(std::memcmp(got.data(), ref.data(), D * sizeof(float)), 0) << i;
  }
  for (int64_t b = 1 * rb; b < 2 * rb; ++b) ASSERT_EQ(cache[b], std::byte{0});  // slot 1 unwritten
}

// The attention read path over an fp8_ds_mla cache computes exactly what it computes over an f32
// cache holding the dequantised rows (dense and sparse, every variant).
TEST(DsMlaCache, AttentionReadsTheDequantisedRows) {
  ThreadPool pool(3);
  MlaCase c;
  c.ds_mla = true;
  c.rank = 160;  // one whole group of 128 and a partial one
  c.rope = 16;
  c.build();
  MlaCase f = c;  // same tables and slots; an f32 cache of the dequantised rows
  f.ds_mla = false;
  f.dtype = DType::kF32;
  f.cache.assign(c.cache.size() / ds_mla_row_bytes(c.row(), c.rank) * c.row() * 4, std::byte{0});
  f.kv = c.kv;
  f.kv.dtype = DType::kF32;
  f.kv.ds_mla_latent = 0;
  f.kv.k = f.cache.data();
  const int64_t slots = static_cast<int64_t>(f.cache.size()) / (c.row() * 4);
  for (int64_t sl = 0; sl < slots; ++sl)
    read_mla_row(c.kv, sl, reinterpret_cast<float*>(f.cache.data()) + sl * c.row());
  const int64_t T = c.num_queries(), ldq = c.num_heads * c.row(), ldo = c.num_heads * c.rank;
  auto q = random_vector(T * ldq, 17, 0.5f);
  const int64_t per = mla_attention_scratch_floats(c.num_heads, c.row(), c.rank, 64);
  std::vector<float> scratch(per * pool.size());
  std::vector<std::string> variants = {"reference"};
  for (const std::string& v : fast_variants()) variants.push_back(v);
  for (const std::string& v : variants) {
    std::vector<float> a(T * ldo, -1), b(T * ldo, -2);
    AttentionArgs x = c.args(q.data(), ldq, a.data(), ldo),
                  y = f.args(q.data(), ldq, b.data(), ldo);
    x.scratch = y.scratch = scratch.data();
    x.scratch_floats_per_thread = y.scratch_floats_per_thread = per;
    mla_attention(kernel_ops(v), x, c.rank, pool);
    mla_attention(kernel_ops(v), y, c.rank, pool);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << v;
  }
  // Sparse: up to 4 spread positions of each row's context.
  const int64_t topk = 4;
  std::vector<int32_t> sel(T * topk), counts(T);
  for (int s = 0, t = 0; s < static_cast<int>(c.ctx.size()); ++s)
    for (int32_t i = c.query_start[s]; i < c.query_start[s + 1]; ++i, ++t) {
      const int64_t ctx = c.seq_lens[s] - (c.query_start[s + 1] - i) + 1;
      counts[t] = static_cast<int32_t>(std::min(ctx, topk));
      for (int k = 0; k < counts[t]; ++k)
        sel[t * topk + k] = static_cast<int32_t>(k * ctx / counts[t]);
    }
  std::vector<float> a(T * ldo, -1), b(T * ldo, -2);
  AttentionArgs x = c.args(q.data(), ldq, a.data(), ldo), y = f.args(q.data(), ldq, b.data(), ldo);
  x.scratch = y.scratch = scratch.data();
  x.scratch_floats_per_thread = y.scratch_floats_per_thread = per;
  mla_sparse_attention(x, c.rank, sel.data(), topk, counts.data(), pool, 0, T);
  mla_sparse_attention(y, c.rank, sel.data(), topk, counts.data(), pool, 0, T);
  ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  // And the quantisation is real: the rows differ from the written floats, within fp8 precision.
  double max_diff = 0;
  const auto lat0 = random_vector(c.seq_lens[0] * c.rank, 100, 1.0f);  // as build() wrote seq 0
  for (int64_t j = 0; j < c.seq_lens[0]; ++j) {
    std::vector<float> got(c.row());
    read_mla_row(c.kv, int64_t{c.tables[j / c.block_size]} * c.block_size + j % c.block_size,
                 got.data());
    for (int64_t e = 0; e < c.rank; ++e) {
      const float want = lat0[j * c.rank + e];
      max_diff = std::max(max_diff, double{std::fabs(got[e] - want)});
      ASSERT_LE(std::fabs(got[e] - want), std::fabs(want) * 0x1p-4f + 1e-3f) << j << " " << e;
    }
  }
  EXPECT_GT(max_diff, 0.0);
}

// The SIMD variants carry their own sparse-attention kernels (the tests above compare every
// supported variant with the plain one); variants this CPU lacks are named and skipped.
TEST(DsaKernels, SimdVariantsHaveTheirOwnKernelsOrAreSkipped) {
  const KernelOps& plain = kernel_ops("portable");
  EXPECT_EQ(reference_kernel_ops().dsa_select, plain.dsa_select);
  EXPECT_EQ(reference_kernel_ops().mla_sparse_attention, plain.mla_sparse_attention);
  std::string missing;
  for (const char* name : {"avx2", "avx512"}) {
    const KernelVariantInfo* v = find_kernel_variant(name);
    ASSERT_NE(v, nullptr) << name;
    if (!v->is_supported()) {
      missing +=
          std::string(missing.empty() ? "" : ", ") + name + " (needs " + v->cpu_features + ")";
      continue;
    }
    EXPECT_NE(v->ops().dsa_select, plain.dsa_select) << name;
    EXPECT_NE(v->ops().mla_sparse_attention, plain.mla_sparse_attention) << name;
  }
  if (!missing.empty()) GTEST_SKIP() << "this CPU lacks " << missing << "; not run here";
}

// DeepSeek Sparse Attention. An indexer-key cache is an MlaCase whose rows (rank + rope values)
// are the keys; the selection of every variant is checked against the plain one.
struct DsaRun {
  std::vector<int32_t> sel, counts;
};

DsaRun run_dsa_select(const KernelOps* ops, const MlaCase& c, const std::vector<float>& q,
                      const std::vector<float>& w, int64_t topk, ThreadPool& pool,
                      int64_t row_begin = 0, int64_t row_end = -1) {
  const int64_t T = c.num_queries(), D = c.row(), H = c.num_heads;
  if (row_end < 0) row_end = T;
  const int64_t per = dsa_select_scratch_floats(D, c.seq_lens.empty() ? 0 : 4096);
  std::vector<float> scratch(per * pool.size());
  DsaRun r;
  r.sel.assign((row_end - row_begin) * topk, -1);
  r.counts.assign(row_end - row_begin, -1);
  AttentionArgs a = c.args(q.data() + row_begin * H * D, H * D, nullptr, 0);
  a.scratch = scratch.data();
  a.scratch_floats_per_thread = per;
  if (ops != nullptr)
    dsa_select(*ops, a, w.data() + row_begin * H, H, topk, r.sel.data(), r.counts.data(), pool,
               row_begin, row_end);
  else
    dsa_select(a, w.data() + row_begin * H, H, topk, r.sel.data(), r.counts.data(), pool, row_begin,
               row_end);
  return r;
}

// Row t's indexer scores in double, from the cached (dequantised) keys.
std::vector<double> dsa_scores_f64(const MlaCase& c, const std::vector<float>& q,
                                   const std::vector<float>& w, int64_t t, int* seq = nullptr) {
  int s = 0;
  while (c.query_start[s + 1] <= t) ++s;
  if (seq != nullptr) *seq = s;
  const int64_t ctx = c.seq_lens[s] - (c.query_start[s + 1] - t) + 1, D = c.row();
  std::vector<double> out(ctx);
  std::vector<float> key(D);
  for (int64_t j = 0; j < ctx; ++j) {
    read_mla_row(c.kv,
                 int64_t{c.tables[s * c.blocks_per_seq + j / c.block_size]} * c.block_size +
                     j % c.block_size,
                 key.data());
    double score = 0;
    for (int h = 0; h < c.num_heads; ++h) {
      double d = 0;
      for (int64_t e = 0; e < D; ++e) d += double{q[(t * c.num_heads + h) * D + e]} * key[e];
      score += w[t * c.num_heads + h] * std::max(d, 0.0);
    }
    out[j] = score;
  }
  return out;
}

// Rewrites every cached key of c with values of gen(sequence, position, element).
template <typename Gen>
void rewrite_keys(MlaCase& c, Gen gen) {
  const int64_t D = c.row();
  for (int s = 0; s < static_cast<int>(c.seq_lens.size()); ++s) {
    std::vector<float> keys(c.seq_lens[s] * D);
    std::vector<int64_t> slots;
    for (int64_t j = 0; j < c.seq_lens[s]; ++j) {
      for (int64_t e = 0; e < D; ++e) keys[j * D + e] = gen(s, j, e);
      slots.push_back(int64_t{c.tables[s * c.blocks_per_seq + j / c.block_size]} * c.block_size +
                      j % c.block_size);
    }
    dsa_key_write(keys.data(), D, c.seq_lens[s], slots.data(), c.kv);
  }
}

// A few hundred cached keys per sequence, so that most rows choose topk of many.
MlaCase dsa_case(DType dtype, int heads, int64_t dim) {
  MlaCase c;
  c.dtype = dtype;
  c.num_heads = heads;
  c.rank = dim - 8;
  c.rope = 8;
  c.block_size = 16;
  c.ctx = {300, 5, 180};
  c.new_tokens = {3, 2, 4};
  c.build();
  return c;
}

// Small multiples of 1/4 everywhere (every key row holds 1.75, so an fp8 row scale is 1/256):
// every product and sum is exact in f32, so every variant's scores equal the plain ones to the
// last bit, with many ties, and the selections must be identical.
TEST(DsaSelect, ExactScoresSelectExactlyThePlainSetTiesIncluded) {
  ThreadPool pool(3);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    for (int heads : {5, 64}) {
      for (int64_t dim : {32, 128}) {
        MlaCase c = dsa_case(dtype, heads, dim);
        rewrite_keys(c, [](int s, int64_t j, int64_t e) {
          return e == 0 ? 1.75f : 0.25f * static_cast<float>((s * 7 + j * 3 + e * 5) % 15 - 7);
        });
        const int64_t T = c.num_queries();
        std::vector<float> q(T * heads * dim), w(T * heads);
        for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<float>(int((i * 11) % 5) - 2);
        for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>((i * 3) % 8);
        for (int64_t topk : {4, 64}) {
          const DsaRun want = run_dsa_select(nullptr, c, q, w, topk, pool);
          for (const std::string& v : fast_variants()) {
            const DsaRun got = run_dsa_select(&kernel_ops(v), c, q, w, topk, pool);
            ASSERT_EQ(got.counts, want.counts) << v;
            ASSERT_EQ(got.sel, want.sel) << v << " " << dtype_name(dtype) << " heads " << heads
                                         << " dim " << dim << " topk " << topk;
          }
        }
      }
    }
  }
}

// Random keys and queries: a variant's selection may differ from the plain one only between
// positions whose exact (double) scores are within 1e-5 of the row's largest score of the k-th
// best: the rounding of f32 dot products in another order.
TEST(DsaSelect, FastVariantsSelectThePlainSetUpToRounding) {
  ThreadPool pool(2);
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF8E4M3}) {
    for (int heads : {3, 64}) {
      const int64_t dim = heads == 64 ? 128 : 40, topk = 32;
      MlaCase c = dsa_case(dtype, heads, dim);
      const int64_t T = c.num_queries();
      auto q = random_vector(T * heads * dim, 31, 0.3f);
      auto w = random_vector(T * heads, 32, 1.0f);
      const DsaRun want = run_dsa_select(nullptr, c, q, w, topk, pool);
      for (const std::string& v : fast_variants()) {
        const DsaRun got = run_dsa_select(&kernel_ops(v), c, q, w, topk, pool);
        ASSERT_EQ(got.counts, want.counts) << v;
        int64_t differing = 0;
        for (int64_t t = 0; t < T; ++t) {
          const int n = want.counts[t];
          std::vector<int32_t> a(want.sel.begin() + t * topk, want.sel.begin() + t * topk + n);
          std::vector<int32_t> b(got.sel.begin() + t * topk, got.sel.begin() + t * topk + n);
          if (a == b) continue;
          const std::vector<double> sc = dsa_scores_f64(c, q, w, t);
          double mx = 0;
          for (double x : sc) mx = std::max(mx, std::fabs(x));
          std::vector<double> top(sc);
          std::nth_element(top.begin(), top.begin() + topk - 1, top.end(), std::greater<>());
          const double kth = top[topk - 1];
          std::vector<int32_t> diff;
          std::set_symmetric_difference(a.begin(), a.end(), b.begin(), b.end(),
                                        std::back_inserter(diff));
          for (int32_t j : diff)
            ASSERT_LE(std::fabs(sc[j] - kth), 1e-5 * mx)
                << v << " " << dtype_name(dtype) << " row " << t << " position " << j;
          differing += static_cast<int64_t>(diff.size());
        }
        EXPECT_LE(differing, 2 * T) << v;  // ties at the boundary only, not a different ranking
      }
    }
  }
}

// A row's selection is the same alone or in a batch, on one thread or three (with fewer rows
// than threads a row's positions are scored in parallel chunks), for every variant, bit for bit.
TEST(DsaSelect, BatchAndThreadInvariant) {
  for (DType dtype : {DType::kF32, DType::kF8E4M3}) {
    MlaCase c;
    c.dtype = dtype;
    c.num_heads = 6;
    c.rank = 24;
    c.rope = 8;
    c.block_size = 16;
    c.ctx = {2600, 40};
    c.new_tokens = {3, 2};
    c.build();
    const int64_t T = c.num_queries(), topk = 16;
    auto q = random_vector(T * c.num_heads * c.row(), 41, 0.3f);
    auto w = random_vector(T * c.num_heads, 42, 1.0f);
    ThreadPool one(1), three(3);
    std::vector<std::string> variants = {"reference"};
    for (const std::string& v : fast_variants()) variants.push_back(v);
    for (const std::string& v : variants) {
      const DsaRun all = run_dsa_select(&kernel_ops(v), c, q, w, topk, three);
      for (int64_t t = 0; t < T; ++t) {
        for (ThreadPool* pool : {&one, &three}) {
          const DsaRun row = run_dsa_select(&kernel_ops(v), c, q, w, topk, *pool, t, t + 1);
          ASSERT_EQ(row.counts[0], all.counts[t]) << v << " row " << t;
          ASSERT_TRUE(std::equal(row.sel.begin(), row.sel.begin() + row.counts[0],
                                 all.sel.begin() + t * topk))
              << v << " " << dtype_name(dtype) << " row " << t << " threads " << pool->size();
        }
      }
    }
  }
}

// mla_sparse_attention of every variant against the plain one, each cache dtype and the
// fp8_ds_mla layout, over a spread selection of each row's context; with every position selected
// it is the dense attention (the double-precision reference).
TEST(MlaSparseAttention, FastVariantsMatchThePlainOne) {
  ThreadPool pool(3);
  for (int layout = 0; layout < 6; ++layout) {
    MlaCase c;
    const DType dtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3};
    if (layout < 4) {
      c.dtype = dtypes[layout];
    } else {
      c.ds_mla = true;
      c.rank = 160;
      c.rope = 16;
    }
    // Layout 5 (fp8_ds_mla again): 40 heads and a scratch room for blocks of 16 heads.
    const bool wide = layout == 5;
    c.num_heads = wide ? 40 : 6;
    c.ctx = {40, 1, 23};
    c.build();
    const int64_t T = c.num_queries(), H = c.num_heads, ldq = H * c.row() + 2, ldo = H * c.rank + 1;
    auto q = random_vector(T * ldq, 51, 0.5f);
    for (int64_t topk : {8, 64}) {
      std::vector<int32_t> sel(T * topk), counts(T);
      for (int s = 0, t = 0; s < static_cast<int>(c.ctx.size()); ++s)
        for (int32_t i = c.query_start[s]; i < c.query_start[s + 1]; ++i, ++t) {
          const int64_t ctx = c.seq_lens[s] - (c.query_start[s + 1] - i) + 1;
          counts[t] = static_cast<int32_t>(std::min(ctx, topk));
          for (int k = 0; k < counts[t]; ++k)
            sel[t * topk + k] = static_cast<int32_t>(k * ctx / counts[t]);
        }
      const int64_t per =
          mla_attention_scratch_floats(H, c.row(), c.rank, wide ? 8 * topk + 4 * c.rank : topk);
      std::vector<float> scratch(per * pool.size());
      auto run = [&](const KernelOps* ops, std::vector<float>& out, int64_t t0, int64_t t1) {
        AttentionArgs a = c.args(q.data() + t0 * ldq, ldq, out.data() + t0 * ldo, ldo);
        a.scratch = scratch.data();
        a.scratch_floats_per_thread = per;
        if (ops != nullptr)
          mla_sparse_attention(*ops, a, c.rank, sel.data() + t0 * topk, topk, counts.data() + t0,
                               pool, t0, t1);
        else
          mla_sparse_attention(a, c.rank, sel.data() + t0 * topk, topk, counts.data() + t0, pool,
                               t0, t1);
      };
      std::vector<float> want(T * ldo, -1.0f);
      run(nullptr, want, 0, T);
      if (topk == 64) {  // every position of every row: the dense attention
        std::vector<float> dense(T * ldo, -1.0f);
        mla_attention(reference_kernel_ops(), c.args(q.data(), ldq, dense.data(), ldo), c.rank,
                      pool);
        for (size_t i = 0; i < dense.size(); ++i) ASSERT_NEAR(want[i], dense[i], 2e-5) << i;
      }
      for (const std::string& v : fast_variants()) {
        std::vector<float> got(T * ldo, -1.0f), rows(T * ldo, -1.0f);
        run(&kernel_ops(v), got, 0, T);
        for (int64_t t = 0; t < T; ++t) {
          for (int64_t e = 0; e < H * c.rank; ++e)
            ASSERT_NEAR(got[t * ldo + e], want[t * ldo + e],
                        2e-5 + 1e-5 * std::fabs(want[t * ldo + e]))
                << v << " layout " << layout << " topk " << topk << " row " << t << " " << e;
          ASSERT_EQ(got[t * ldo + H * c.rank], -1.0f) << "wrote past the heads";
        }
        for (int64_t t = 0; t < T; ++t) run(&kernel_ops(v), rows, t, t + 1);  // batch-invariant
        ASSERT_EQ(std::memcmp(got.data(), rows.data(), got.size() * sizeof(float)), 0) << v;
      }
    }
  }
}

}  // namespace
}  // namespace strata
