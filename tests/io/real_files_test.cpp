// The real stories260K checkpoint in both formats holds the same weights.
#include <gtest/gtest.h>

#include <cstring>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace strata::io {
namespace {

TEST(RealFilesTest, Stories260KGgufAndSafetensorsAgree) {
  STRATA_REQUIRE_SHARED("models/stories260K.gguf");
  STRATA_REQUIRE_SHARED("models/stories260K-hf/model.safetensors");
  auto g = GgufFile::open(testing::shared_data_path("models/stories260K.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)->version(), 3u);
  EXPECT_EQ((*g)->architecture(), "llama");
  EXPECT_EQ((*g)->tensor_infos().size(), 48u);
  EXPECT_EQ((*g)->get_string_array("tokenizer.ggml.tokens")->size(), 512u);
  auto st = SafetensorsSet::open_dir(testing::shared_data_path("models/stories260K-hf"));
  ASSERT_TRUE(st.ok()) << st.status().to_string();
  // Tensors that need no RoPE permutation are byte-identical.
  auto a = (*g)->tensor("blk.0.ffn_down.weight");
  auto b = (*st)->get("model.layers.0.mlp.down_proj.weight");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->shape, b->shape);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{64, 172}));
  ASSERT_EQ(a->nbytes, b->nbytes);
  EXPECT_EQ(std::memcmp(a->data, b->data, a->nbytes), 0);
  auto e1 = (*g)->tensor("token_embd.weight");
  auto e2 = (*st)->get("model.embed_tokens.weight");
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_EQ(e1->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(std::memcmp(e1->data, e2->data, e1->nbytes), 0);
}

}  // namespace
}  // namespace strata::io
