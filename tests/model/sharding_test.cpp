// linear_layers(): every matmul weight of a model with its shape and how tensor parallelism
// would split it (column: output rows; row: input columns; vocab; expert; replicated).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "model/model.h"
#include "model/moe.h"
#include "tiny_models.h"

namespace strata {
namespace {

TEST(LinearLayers, DenseLlamaDeclaresColumnRowAndVocabSplits) {
  ThreadPool pool(1);
  auto m = testing::load_tiny(testing::tiny_archs()[0], pool, "float32");  // llama3_untied
  ASSERT_TRUE(m.model);
  const ModelConfig& c = m.model->config();
  std::map<std::string, LinearInfo> by_name;
  for (const auto& l : m.model->linear_layers()) {
    EXPECT_TRUE(by_name.emplace(l.name, l).second) << "duplicate " << l.name;
  }
  const int64_t hd = c.head_dim, H = c.hidden_size;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    ASSERT_TRUE(by_name.count(p + "attn.qkv")) << p;
    const LinearInfo& qkv = by_name[p + "attn.qkv"];
    EXPECT_EQ(qkv.sharding, Sharding::kColumn);
    EXPECT_EQ(qkv.rows, (c.num_attention_heads + 2 * c.num_key_value_heads) * hd);
    EXPECT_EQ(qkv.cols, H);
    const LinearInfo& o = by_name[p + "attn.o"];
    EXPECT_EQ(o.sharding, Sharding::kRow);
    EXPECT_EQ(o.cols, c.num_attention_heads * hd);
    EXPECT_EQ(by_name[p + "mlp.gate_up"].sharding, Sharding::kColumn);
    EXPECT_EQ(by_name[p + "mlp.gate_up"].rows, 2 * c.intermediate_size);
    EXPECT_EQ(by_name[p + "mlp.down"].sharding, Sharding::kRow);
    EXPECT_EQ(by_name[p + "mlp.down"].cols, c.intermediate_size);
  }
  ASSERT_TRUE(by_name.count("lm_head"));
  EXPECT_EQ(by_name["lm_head"].sharding, Sharding::kVocab);
  EXPECT_EQ(by_name["lm_head"].rows, c.vocab_size);
  EXPECT_EQ(by_name.size(), static_cast<size_t>(4 * c.num_hidden_layers + 1));
}

TEST(LinearLayers, EveryArchitectureDeclaresItsMatmulsAndMoeExpertsAsExpertParallel) {
  ThreadPool pool(1);
  for (const auto& arch : testing::tiny_archs()) {
    auto m = testing::load_tiny(arch, pool, "float32");
    ASSERT_TRUE(m.model) << arch.name;
    const auto linears = m.model->linear_layers();
    ASSERT_FALSE(linears.empty()) << arch.name;
    int64_t params = 0, experts = 0, rows_split = 0, vocab = 0;
    std::set<std::string> names;
    for (const auto& l : linears) {
      EXPECT_TRUE(names.insert(l.name).second) << arch.name << " duplicate " << l.name;
      EXPECT_GT(l.rows, 0) << l.name;
      EXPECT_GT(l.cols, 0) << l.name;
      params += l.rows * l.cols;
      experts += l.sharding == Sharding::kExpert;
      rows_split += l.sharding == Sharding::kRow;
      vocab += l.sharding == Sharding::kVocab;
      EXPECT_STRNE(sharding_name(l.sharding), "") << l.name;
    }
    EXPECT_LE(params, m.model->parameter_count()) << arch.name;
    EXPECT_EQ(vocab, 1) << arch.name << ": one vocab-parallel head";
    EXPECT_GE(rows_split, m.model->config().num_hidden_layers) << arch.name;
    auto spec = parse_moe_spec(m.model->config());
    ASSERT_TRUE(spec.ok());
    if (spec->has_value()) {
      int64_t moe_layers = 0;
      for (int64_t l = 0; l < m.model->config().num_hidden_layers; ++l)
        moe_layers += (*spec)->is_moe(l);
      // gate_up and down per routed expert per MoE layer.
      EXPECT_EQ(experts, moe_layers * (*spec)->routing.num_experts * 2) << arch.name;
    } else {
      EXPECT_EQ(experts, 0) << arch.name;
    }
  }
}

}  // namespace
}  // namespace strata
