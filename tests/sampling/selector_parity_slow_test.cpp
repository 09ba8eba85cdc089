// The selector parity checks on a real-size vocabulary (labelled slow: about two seconds).
#include "selector_parity.h"

namespace strata::sampling {
namespace {

TEST(SelectorParitySlowTest, MatchesFullSortReferenceOn152kVocabulary) {
  Rng rng(2024);
  const std::vector<float> x = lm_like_logits(rng, 152064, 2.0);  // Qwen2's vocabulary
  expect_matches_reference_all_paths(x, rng);
}

TEST(SelectorParitySlowTest, FlatRowsNeedTheBucketSelect) {
  // High temperature on a flat row: top_p needs tens of thousands of tokens.
  Rng rng(77);
  std::vector<float> x(152064);
  for (auto& v : x) v = static_cast<float>(rng.normal() * 0.5);
  expect_matches_reference(x, {.temperature = 1.0f, .top_p = 0.9f}, rng, "flat top_p 0.9");
  expect_matches_reference(x, {.temperature = 1.0f, .top_p = 0.3f}, rng, "flat top_p 0.3");
  expect_matches_reference(x, {.temperature = 1.0f, .top_k = 100000}, rng, "flat top_k 100000");
}

}  // namespace
}  // namespace strata::sampling
