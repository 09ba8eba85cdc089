#include "kv/block_hash.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <set>
#include <vector>

namespace strata::kv {
namespace {

std::vector<int32_t> iota_tokens(int n, int32_t start = 0) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = start + i;
  return t;
}

TEST(BlockHashTest, MatchesTheDocumentedSerialisation) {
  // parent (lo, hi) | u64 token count | int32 tokens | u64 extra length | extra bytes, xxh3-128.
  std::vector<int32_t> tokens = {5, 6, 7, 8};
  std::string extra = "salt";
  BlockHash parent{0x1111, 0x2222};
  std::vector<unsigned char> buf;
  auto put = [&](const void* p, size_t n) {
    const auto* c = static_cast<const unsigned char*>(p);
    buf.insert(buf.end(), c, c + n);
  };
  uint64_t head[3] = {parent.lo, parent.hi, tokens.size()};
  put(head, sizeof(head));
  put(tokens.data(), tokens.size() * 4);
  uint64_t len = extra.size();
  put(&len, 8);
  put(extra.data(), extra.size());
  XXH128_hash_t want = XXH3_128bits(buf.data(), buf.size());
  BlockHash got = hash_block(parent, tokens, extra);
  EXPECT_EQ(got.lo, want.low64);
  EXPECT_EQ(got.hi, want.high64);
  EXPECT_EQ(to_string(got).size(), 32u);
}

TEST(BlockHashTest, EveryInputChangesTheHash) {
  auto t = iota_tokens(16);
  BlockHash root = root_block_hash();
  BlockHash base = hash_block(root, t, "");
  EXPECT_EQ(base, hash_block(root, t, ""));
  auto t2 = t;
  t2[15] = 99;
  EXPECT_NE(base, hash_block(root, t2, ""));
  EXPECT_NE(base, hash_block(BlockHash{1, 2}, t, ""));
  EXPECT_NE(base, hash_block(root, t, "a"));
  // Length prefixes: moving a token into the extra bytes does not collide.
  EXPECT_NE(hash_block(root, std::vector<int32_t>{1, 2}, ""),
            hash_block(root, std::vector<int32_t>{1}, std::string("\x02\0\0\0", 4)));
}

TEST(BlockHashTest, LargeBlocksAndLongSaltsUseTheSameFunction) {
  // 1024-token blocks with a 1 KiB salt take the streaming path; the result must equal a one-shot
  // xxh3 of the same bytes.
  auto t = iota_tokens(1024, 7);
  std::string salt(1024, 'x');
  std::vector<unsigned char> buf;
  BlockHash root = root_block_hash();
  uint64_t head[3] = {root.lo, root.hi, t.size()};
  buf.insert(buf.end(), reinterpret_cast<unsigned char*>(head),
             reinterpret_cast<unsigned char*>(head) + 24);
  buf.insert(buf.end(), reinterpret_cast<unsigned char*>(t.data()),
             reinterpret_cast<unsigned char*>(t.data()) + t.size() * 4);
  uint64_t len = salt.size();
  buf.insert(buf.end(), reinterpret_cast<unsigned char*>(&len),
             reinterpret_cast<unsigned char*>(&len) + 8);
  buf.insert(buf.end(), salt.begin(), salt.end());
  XXH128_hash_t want = XXH3_128bits(buf.data(), buf.size());
  BlockHash got = hash_block(root, t, salt);
  EXPECT_EQ(got.lo, want.low64);
  EXPECT_EQ(got.hi, want.high64);
}

TEST(BlockHashTest, ChainCoversFullBlocksOnlyAndExtendsIncrementally) {
  auto t = iota_tokens(37);
  std::vector<BlockHash> all;
  append_block_hashes(t, 8, "s", &all);
  ASSERT_EQ(all.size(), 4u);  // 37 / 8 full blocks
  EXPECT_EQ(all[0], hash_block(root_block_hash(), std::span(t).subspan(0, 8), "s"));
  EXPECT_EQ(all[1], hash_block(all[0], std::span(t).subspan(8, 8), ""));
  EXPECT_EQ(all[3], hash_block(all[2], std::span(t).subspan(24, 8), ""));

  std::vector<BlockHash> inc;
  for (int n = 0; n <= 37; ++n) append_block_hashes(std::span(t).first(n), 8, "s", &inc);
  EXPECT_EQ(inc, all);
}

TEST(BlockHashTest, SaltAndPrefixPropagateThroughTheChain) {
  auto t = iota_tokens(32);
  std::vector<BlockHash> a, b, c;
  append_block_hashes(t, 16, "", &a);
  append_block_hashes(t, 16, "tenant-2", &b);
  auto t2 = t;
  t2[0] = 1000;  // differs only in block 0
  append_block_hashes(t2, 16, "", &c);
  EXPECT_NE(a[1], b[1]);  // same tokens in block 1, different salt
  EXPECT_NE(a[1], c[1]);  // same tokens in block 1, different prefix
  std::set<std::pair<uint64_t, uint64_t>> distinct;
  for (auto* v : {&a, &b, &c})
    for (auto& h : *v) distinct.insert({h.lo, h.hi});
  EXPECT_EQ(distinct.size(), 6u);
}

}  // namespace
}  // namespace strata::kv
