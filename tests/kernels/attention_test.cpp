#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/aligned_buffer.h"
#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/ops.h"

namespace strata {
namespace {

using testing::fast_variants;
using testing::random_vector;

// A small paged cache filled with the same logical K/V for any block size: key j of sequence s
// is a deterministic function of (s, j), and blocks are assigned in a scrambled order.
struct Fixture {
  int num_heads, num_kv_heads, head_dim, block_size;
  DType dtype;
  std::vector<int> seq_lens, q_lens;
  std::vector<int> ids;  // data identity of each sequence (defaults to its index)
  int64_t max_blocks = 0;
  AlignedBuffer k, v, ks, vs;
  PagedKvLayer kv;
  std::vector<int32_t> block_tables, query_start;
  std::vector<float> q;

  void build() {
    int num_seqs = static_cast<int>(seq_lens.size());
    if (ids.empty())
      for (int s = 0; s < num_seqs; ++s) ids.push_back(s);
    for (int L : seq_lens)
      max_blocks = std::max<int64_t>(max_blocks, (L + block_size - 1) / block_size);
    int64_t num_blocks = num_seqs * max_blocks + 1;
    int64_t row =
        static_cast<int64_t>(num_kv_heads) * block_size * head_dim * dtype_block_bytes(dtype);
    k.resize(num_blocks * row);
    v.resize(num_blocks * row);
    kv = {dtype, block_size, num_kv_heads, head_dim, k.data(), v.data(), 1.0f, 1.0f};
    if (dtype == DType::kF8E4M3) {
      ks.resize(num_blocks * num_kv_heads * block_size * 4);
      vs.resize(num_blocks * num_kv_heads * block_size * 4);
      kv.k_row_scale = ks.as<float>();
      kv.v_row_scale = vs.as<float>();
    }
    block_tables.assign(num_seqs * max_blocks, 0);
    // Scrambled physical blocks (block 0 unused, like a null block).
    int64_t next = 1;
    std::vector<int64_t> perm;
    for (int64_t b = 1; b < num_blocks; ++b) perm.push_back(b);
    for (size_t i = 0; i < perm.size(); ++i) std::swap(perm[i], perm[(i * 7 + 3) % perm.size()]);
    for (int s = 0; s < num_seqs; ++s)
      for (int64_t b = 0; b < max_blocks; ++b)
        block_tables[s * max_blocks + b] = static_cast<int32_t>(perm[next++ - 1]);
    query_start = {0};
    for (int s = 0; s < num_seqs; ++s) query_start.push_back(query_start.back() + q_lens[s]);
    for (int s = 0; s < num_seqs; ++s) {
      std::vector<int64_t> slots;
      for (int j = 0; j < seq_lens[s]; ++j)
        slots.push_back(int64_t{block_tables[s * max_blocks + j / block_size]} * block_size +
                        j % block_size);
      auto kf = random_vector(seq_lens[s] * num_kv_heads * head_dim, 1000 + ids[s], 1.0f);
      auto vf = random_vector(seq_lens[s] * num_kv_heads * head_dim, 2000 + ids[s], 1.0f);
      reference_kernel_ops().kv_write(kf.data(), num_kv_heads * head_dim, vf.data(),
                                      num_kv_heads * head_dim, seq_lens[s], slots.data(), kv);
    }
    q.clear();
    for (int s = 0; s < num_seqs; ++s) {
      // Query rows depend only on (sequence, position).
      for (int t = 0; t < q_lens[s]; ++t) {
        int pos = seq_lens[s] - q_lens[s] + t;
        auto row = random_vector(num_heads * head_dim, 5000 + ids[s] * 1000 + pos, 1.0f);
        q.insert(q.end(), row.begin(), row.end());
      }
    }
  }

  std::vector<float> run(const std::string& variant, ThreadPool& pool) {
    int64_t ld = static_cast<int64_t>(num_heads) * head_dim;
    std::vector<float> out(query_start.back() * ld, 0);
    int max_len = *std::max_element(seq_lens.begin(), seq_lens.end());
    int64_t per = attention_scratch_floats(num_heads, num_kv_heads, head_dim, max_len);
    std::vector<float> scratch(per * pool.size());
    AttentionArgs a;
    a.q = q.data();
    a.ldq = ld;
    a.out = out.data();
    a.ldo = ld;
    a.num_heads = num_heads;
    a.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    a.kv = &kv;
    a.num_seqs = static_cast<int>(seq_lens.size());
    a.query_start = query_start.data();
    a.seq_lens = reinterpret_cast<const int32_t*>(seq_lens.data());
    a.block_tables = block_tables.data();
    a.max_blocks_per_seq = max_blocks;
    a.scratch = scratch.data();
    a.scratch_floats_per_thread = per;
    kernel_ops(variant).attention(a, pool);
    return out;
  }
};

TEST(AttentionParity, RaggedBatchesAllBlockSizesAndDtypes) {
  ThreadPool pool(2);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    for (int bs : {1, 8, 16, 32}) {
      for (auto [nh, nkv, hd] :
           {std::tuple{4, 4, 16}, std::tuple{8, 2, 64}, std::tuple{6, 3, 20}}) {
        Fixture f{nh, nkv, hd, bs, dt, {1, 37, 5, 70}, {1, 37, 2, 1}};
        f.build();
        auto ref = f.run("reference", pool);
        for (const std::string& v : fast_variants()) {
          auto out = f.run(v, pool);
          for (size_t i = 0; i < out.size(); ++i)
            ASSERT_NEAR(out[i], ref[i], 2e-5f * (1 + std::fabs(ref[i])))
                << v << " " << dtype_name(dt) << " bs=" << bs << " hd=" << hd;
        }
      }
    }
  }
}

// The AVX-512 attention (query slots in the lanes) repeats the AVX2 kernel's arithmetic for
// every query, so the two variants agree bit for bit: prefill tiles, decode rows, GQA groups,
// head dims that are and are not multiples of 16, every cache dtype and block size.
TEST(AttentionParity, Avx512EqualsAvx2BitForBit) {
  const KernelVariantInfo* a = find_kernel_variant("avx2");
  const KernelVariantInfo* b = find_kernel_variant("avx512");
  ASSERT_TRUE(a && b);
  if (!a->is_supported() || !b->is_supported())
    GTEST_SKIP() << "this CPU lacks AVX-512 (or AVX2); the avx512 variant is not run here";
  ThreadPool pool(2);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
    for (int bs : {1, 16, 32}) {
      for (auto [nh, nkv, hd] : {std::tuple{4, 4, 16}, std::tuple{8, 2, 64}, std::tuple{6, 3, 24},
                                 std::tuple{12, 12, 64}, std::tuple{32, 4, 40}}) {
        Fixture f{nh, nkv, hd, bs, dt, {1, 37, 5, 70, 300}, {1, 37, 2, 1, 150}};
        f.build();
        auto x = f.run("avx2", pool);
        auto y = f.run("avx512", pool);
        ASSERT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0)
            << dtype_name(dt) << " bs=" << bs << " heads " << nh << "/" << nkv << " hd=" << hd;
      }
    }
  }
}

// Checkpoint KV scales (k_scale, v_scale != 1) multiply every cached value, in the prefill tiles
// and in decode rows converted in registers alike; with scales of 1 the decode path skips the
// multiply, which must not change a bit.
TEST(AttentionParity, LayerKvScales) {
  ThreadPool pool(2);
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF32}) {
    Fixture f{8, 4, 32, 16, dt, {30, 9, 50}, {30, 1, 1}};
    f.build();
    auto unscaled = f.run("reference", pool);
    f.kv.k_scale = 0.5f;
    f.kv.v_scale = 3.0f;
    auto ref = f.run("reference", pool);
    // Halving every key halves the logits: the outputs change.
    ASSERT_NE(std::memcmp(ref.data(), unscaled.data(), ref.size() * 4), 0) << dtype_name(dt);
    for (const std::string& v : fast_variants()) {
      auto out = f.run(v, pool);
      for (size_t i = 0; i < out.size(); ++i)
        ASSERT_NEAR(out[i], ref[i], 3e-5f * (1 + std::fabs(ref[i]))) << v << " " << dtype_name(dt);
    }
  }
}

// A sequence longer than the scratch's tile budget (attention_scratch_floats caps a tile's scores
// at 8 x 4096 in all, e.g. 16 rows of 2048 keys): the fast kernels shrink their query tiles and
// still match the
// reference, and a query's row is bit-identical to computing that query alone.
TEST(AttentionParity, LongSequenceShrinksTheQueryTile) {
  ThreadPool pool(2);
  const int nh = 4, nkv = 2, hd = 16;
  Fixture f{nh, nkv, hd, 16, DType::kBF16, {5000, 30}, {19, 30}};
  f.build();
  auto ref = f.run("reference", pool);
  for (const std::string& v : fast_variants()) {
    auto out = f.run(v, pool);
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], ref[i], 2e-5f * (1 + std::fabs(ref[i]))) << v;
    Fixture last{nh, nkv, hd, 16, DType::kBF16, {5000}, {1}};
    last.build();
    auto one = last.run(v, pool);
    ASSERT_EQ(std::memcmp(one.data(), out.data() + 18 * nh * hd, nh * hd * 4), 0) << v;
  }
}

// A decode step (one query: its K/V rows converted in registers) gives bit for bit the row the
// same query gets inside a prefill tile (rows converted once into scratch for 8 queries), for
// every cache dtype, without and with GQA.
TEST(AttentionInvariance, DecodeRowEqualsItsRowInAPrefillTile) {
  ThreadPool pool(2);
  for (const std::string& v : fast_variants()) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
      for (auto [nh, nkv] : {std::pair{4, 4}, std::pair{4, 2}}) {
        const int hd = 32;
        const int64_t ld = nh * hd;
        Fixture whole{nh, nkv, hd, 16, dt, {45}, {45}};
        whole.build();
        auto all = whole.run(v, pool);
        Fixture last{nh, nkv, hd, 16, dt, {45}, {1}};
        last.build();
        auto one = last.run(v, pool);
        ASSERT_EQ(std::memcmp(one.data(), all.data() + 44 * ld, ld * 4), 0)
            << v << " " << dtype_name(dt) << " group " << nh / nkv;
      }
    }
  }
}

// A batch of decode steps (tiles of several adjacent kv heads, as many heads per tile as the
// batch and thread count suggest) gives bit for bit each sequence's last row of its own prefill,
// with one thread or two, for every cache dtype, without and with GQA; and matches the reference.
TEST(AttentionInvariance, DecodeTilesOfSeveralHeadsEqualPrefillRows) {
  ThreadPool p1(1), p2(2);
  const std::vector<int> lens = {45, 20, 33, 7, 64};
  for (const std::string& v : fast_variants()) {
    for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3}) {
      for (auto [nh, nkv] : {std::pair{12, 6}, std::pair{12, 3}, std::pair{16, 16}}) {
        const int hd = 32;
        const int64_t ld = nh * hd;
        Fixture dec{nh, nkv, hd, 16, dt, lens, std::vector<int>(lens.size(), 1)};
        dec.build();
        auto two = dec.run(v, p2);
        auto one = dec.run(v, p1);
        ASSERT_EQ(std::memcmp(one.data(), two.data(), two.size() * 4), 0)
            << v << " " << dtype_name(dt) << " kv heads " << nkv;
        auto ref = dec.run("reference", p2);
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(two[i], ref[i], 2e-5f * (1 + std::fabs(ref[i])))
              << v << " " << dtype_name(dt) << " kv heads " << nkv;
        for (size_t s = 0; s < lens.size(); ++s) {
          Fixture whole{nh, nkv, hd, 16, dt, {lens[s]}, {lens[s]}, {static_cast<int>(s)}};
          whole.build();
          auto all = whole.run(v, p2);
          ASSERT_EQ(std::memcmp(two.data() + s * ld, all.data() + (lens[s] - 1) * ld, ld * 4), 0)
              << v << " " << dtype_name(dt) << " kv heads " << nkv << " sequence " << s;
        }
      }
    }
  }
}

// A query's output is bit-identical whatever else is in the batch, however the prompt was split
// into chunks, with any block size, and with any thread count.
TEST(AttentionInvariance, QueryOutputIndependentOfBatchChunkAndBlockSize) {
  for (const std::string& v : fast_variants()) {
    ThreadPool p1(1), p2(2);
    const int nh = 8, nkv = 2, hd = 64;
    const int64_t ld = nh * hd;
    for (DType dt : {DType::kF32, DType::kBF16}) {
      // Sequence 7 alone: its whole 40-token prompt in one step, block size 16, one thread.
      Fixture alone{nh, nkv, hd, 16, dt, {40}, {40}, {7}};
      alone.build();
      auto base = alone.run(v, p1);
      // The same sequence's last 9 tokens as a chunk, between two other sequences, block size 8,
      // two threads.
      Fixture batch{nh, nkv, hd, 8, dt, {13, 40, 3}, {13, 9, 1}, {3, 7, 5}};
      batch.build();
      auto out = batch.run(v, p2);
      for (int t = 0; t < 9; ++t)
        ASSERT_EQ(std::memcmp(out.data() + (13 + t) * ld, base.data() + (31 + t) * ld, ld * 4), 0)
            << v << " " << dtype_name(dt) << " query " << t;
    }
  }
}

}  // namespace
}  // namespace strata
