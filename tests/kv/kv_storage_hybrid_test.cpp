// The hybrid KvStorage variant (KvStorageSpec::layer_block_bytes, DeepSeek-V4): per-layer raw
// blocks in one allocation, the layout sizes, and the block copies the KV tiers use (round trip
// through a RAM tier included).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/rng.h"
#include "kv/kv_storage.h"
#include "kv/kv_tiers.h"

namespace strata::kv {
namespace {

using Bytes = std::vector<std::byte>;

Bytes random_bytes(uint64_t seed, int64_t n) {
  Rng rng(seed * 0x9e3779b97f4a7c15ull + 1);
  Bytes b(static_cast<size_t>(n));
  for (auto& x : b) x = static_cast<std::byte>(rng.next_u64());
  return b;
}

// Four layers as V4's: one pages nothing (a window-only layer), the others different sizes
// (HCA-like 2 rows x 584 B per 256 tokens, CSA-like compressed + indexer rows).
KvStorageSpec hybrid_spec() {
  KvStorageSpec s;
  s.num_layers = 4;
  s.num_blocks = 6;
  s.block_size = 256;
  s.dtype = DType::kF8E4M3;
  s.layer_block_bytes = {2 * 584, 0, 64 * 584 + 64 * 132, 2 * 584};
  return s;
}

TEST(KvStorageHybridTest, SizesAndLayerAddressesFollowTheSpec) {
  auto s = KvStorage::allocate(hybrid_spec());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t per_block = 2 * 584 + 0 + 64 * 584 + 64 * 132 + 2 * 584;
  EXPECT_EQ(s->block_bytes(), per_block);
  EXPECT_EQ(s->bytes(), 6 * per_block);
  EXPECT_EQ(s->spec().total_bytes(), 6 * per_block);
  EXPECT_EQ(s->raw(1), nullptr);  // the layer that pages nothing
  EXPECT_EQ(s->v(0), nullptr);
  EXPECT_EQ(s->k_scales(0), nullptr);
  EXPECT_EQ(s->aux(0), nullptr);
  EXPECT_EQ(s->aux_scales(0), nullptr);
  // Layers follow each other in the one allocation, num_blocks blocks each.
  EXPECT_EQ(s->raw(2) - s->raw(0), 6 * 2 * 584);
  EXPECT_EQ(s->raw(3) - s->raw(2), 6 * (64 * 584 + 64 * 132));
  EXPECT_EQ(s->raw(3) + 6 * 2 * 584 - s->raw(0), s->bytes());
}

TEST(KvStorageHybridTest, RefusesBadSpecs) {
  KvStorageSpec s = hybrid_spec();
  s.layer_block_bytes.pop_back();
  EXPECT_FALSE(KvStorage::allocate(s).ok());
  s = hybrid_spec();
  s.layer_block_bytes = {0, 0, 0, 0};
  EXPECT_FALSE(KvStorage::allocate(s).ok());
  s = hybrid_spec();
  s.layer_block_bytes[2] = -1;
  EXPECT_FALSE(KvStorage::allocate(s).ok());
}

TEST(KvStorageHybridTest, BlockCopiesRoundTripAndTouchOnlyTheirBlock) {
  auto s = KvStorage::allocate(hybrid_spec());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const KvStorageSpec& sp = s->spec();
  const int64_t n = s->block_bytes();
  for (int64_t b = 0; b < sp.num_blocks; ++b) s->copy_block_in(b, random_bytes(10 + b, n).data());
  // The reference: per paging layer, the block's bytes at raw(l) + b * layer_block_bytes[l].
  for (int64_t b = 0; b < sp.num_blocks; ++b) {
    Bytes ref;
    for (int64_t l = 0; l < sp.num_layers; ++l) {
      const int64_t lb = sp.layer_block_bytes[static_cast<size_t>(l)];
      if (lb == 0) continue;
      std::byte* p = s->raw(l) + b * lb;
      ref.insert(ref.end(), p, p + lb);
    }
    EXPECT_EQ(ref, random_bytes(10 + b, n)) << "block " << b;
    Bytes out(static_cast<size_t>(n));
    s->copy_block_out(b, out.data());
    EXPECT_EQ(out, random_bytes(10 + b, n)) << "block " << b;
  }
  const Bytes fresh = random_bytes(777, n);
  s->copy_block_in(4, fresh.data());
  for (int64_t b = 0; b < sp.num_blocks; ++b) {
    Bytes out(static_cast<size_t>(n));
    s->copy_block_out(b, out.data());
    EXPECT_EQ(out, b == 4 ? fresh : random_bytes(10 + b, n)) << "block " << b;
  }
}

TEST(KvStorageHybridTest, RamTierMovesWholeHybridBlocks) {
  auto s = KvStorage::allocate(hybrid_spec());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const int64_t n = s->block_bytes();
  KvTierConfig c;
  c.ram_bytes = 4 * n;
  auto t = KvTiers::create(c, &*s);
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const int32_t toks[2] = {1, 2};
  const BlockHash h = hash_block(root_block_hash(), toks, "hybrid");
  s->copy_block_in(1, random_bytes(42, n).data());
  (*t)->store(1, h);
  s->copy_block_in(1, random_bytes(43, n).data());  // the pool block is reused
  (*t)->load(5, h);
  (*t)->wait_for_loads();
  const auto done = (*t)->take_finished_loads();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_TRUE(done[0].ok);
  Bytes out(static_cast<size_t>(n));
  s->copy_block_out(5, out.data());
  EXPECT_EQ(out, random_bytes(42, n));
}

}  // namespace
}  // namespace strata::kv
