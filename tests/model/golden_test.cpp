// stories260K (a real trained Llama) from its HF directory and its GGUF file produces exactly the
// greedy tokens in ../shared/data/golden/stories260K.json.
#include <gtest/gtest.h>

#include "core/json.h"
#include "model_test_util.h"
#include "test_util.h"

namespace strata {
namespace {

struct GoldenCase {
  std::vector<int32_t> prompt_ids, generated_ids;
};

std::vector<GoldenCase> golden_cases() {
  auto j = read_json_file(testing::shared_data_path("golden/stories260K.json"));
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  std::vector<GoldenCase> out;
  if (!j.ok()) return out;
  for (const auto& c : (*j)["cases"])
    out.push_back({c["prompt_ids"].get<std::vector<int32_t>>(),
                   c["generated_ids"].get<std::vector<int32_t>>()});
  return out;
}

LoadedModel load(const std::string& rel, ThreadPool& pool, const std::string& dtype = "auto") {
  LoadOptions o;
  o.model = testing::shared_data_path(rel);
  o.pool = &pool;
  o.dtype = dtype;
  o.limits = {512, 512, 8};
  auto m = load_model(o);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

class Stories260KGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(Stories260KGolden, GreedyTokensMatch) {
  STRATA_REQUIRE_SHARED("golden/stories260K.json");
  STRATA_REQUIRE_SHARED(GetParam());
  ThreadPool pool(2);
  LoadedModel m = load(GetParam(), pool);
  auto cases = golden_cases();
  ASSERT_FALSE(cases.empty());
  for (const auto& c : cases) {
    auto got = testing::greedy(*m.model, c.prompt_ids, static_cast<int>(c.generated_ids.size()),
                               kernel_ops(default_kernel_variant()));
    EXPECT_EQ(got, c.generated_ids) << GetParam() << " prompt of " << c.prompt_ids.size();
  }
}

INSTANTIATE_TEST_SUITE_P(HfAndGguf, Stories260KGolden,
                         ::testing::Values("models/stories260K-hf", "models/stories260K.gguf"));

TEST(Stories260K, HfAndGgufGiveIdenticalGreedyTokensWithEveryKernelVariant) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf");
  STRATA_REQUIRE_SHARED("models/stories260K.gguf");
  ThreadPool pool(2);
  LoadedModel hf = load("models/stories260K-hf", pool);
  LoadedModel gg = load("models/stories260K.gguf", pool);
  std::vector<int32_t> prompt = {1, 403, 407, 261, 378};
  for (const KernelVariantInfo* info : supported_kernel_variants(/*with_reference=*/true)) {
    const std::string& v = info->name;
    auto a = testing::greedy(*hf.model, prompt, 60, kernel_ops(v));
    auto b = testing::greedy(*gg.model, prompt, 60, kernel_ops(v));
    EXPECT_EQ(a, b) << v;
  }
}

}  // namespace
}  // namespace strata
