// Every expected render in ../shared/data/golden/chat_templates.json (made with Jinja2 3.1 under
// transformers' settings from the real tokenizer_config.json files) must match byte for byte.
#include <gtest/gtest.h>

#include "core/file_util.h"
#include "core/json.h"
#include "test_util.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

TEST(ChatTemplateGolden, AllRendersMatchTransformers) {
  STRATA_REQUIRE_SHARED("golden/chat_templates.json");
  auto text = read_file(testing::shared_data_path("golden/chat_templates.json"));
  ASSERT_TRUE(text.ok()) << text.status().to_string();
  auto golden = parse_ordered_json(*text, "golden file");
  ASSERT_TRUE(golden.ok()) << golden.status().to_string();
  const OrderedJson& renders = (*golden)["renders"];
  ASSERT_GE(renders.size(), 36u);
  int checked = 0;
  for (const auto& r : renders) {
    std::string config = r["tokenizer_config"].get<std::string>();
    std::string name = config + " / " + r["case"].get<std::string>();
    SCOPED_TRACE(name);
    auto tmpl = load_chat_template(testing::shared_data_path(config));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
    ChatTemplateInputs in;
    in.messages = &r["messages"];
    in.tools = r.contains("tools") ? &r["tools"] : nullptr;
    in.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    in.extra_kwargs = &r["extra"];
    auto rendered = tmpl->render(in);
    ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
    EXPECT_EQ(*rendered, r["expected"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(renders.size()));
}

// A loaded Tokenizer carries the same template and special tokens as the config file.
TEST(ChatTemplateGolden, FromLoadedTokenizerMatchesTheConfig) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto tok = Tokenizer::load(testing::shared_data_path("tokenizers/qwen2.5"));
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto from_tok = chat_template_from_tokenizer(**tok);
  ASSERT_TRUE(from_tok.ok()) << from_tok.status().to_string();
  auto from_dir = load_chat_template(testing::shared_data_path("tokenizers/qwen2.5"));
  ASSERT_TRUE(from_dir.ok());
  EXPECT_EQ(from_tok->source(), from_dir->source());
  auto golden = parse_ordered_json(
      *read_file(testing::shared_data_path("golden/chat_templates.json")), "golden");
  ASSERT_TRUE(golden.ok());
  int checked = 0;
  for (const auto& r : (*golden)["renders"]) {
    if (r["tokenizer_config"] != "tokenizers/qwen2.5/tokenizer_config.json") continue;
    ChatTemplateInputs in;
    in.messages = &r["messages"];
    in.tools = r.contains("tools") ? &r["tools"] : nullptr;
    in.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    in.extra_kwargs = &r["extra"];
    auto rendered = from_tok->render(in);
    ASSERT_TRUE(rendered.ok()) << rendered.status().to_string();
    EXPECT_EQ(*rendered, r["expected"].get<std::string>()) << r["case"];
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

// Every chat template shipped under tokenizers/ parses (the Mixtral config has none and says so).
TEST(ChatTemplateGolden, EveryTokenizerConfigLoads) {
  STRATA_REQUIRE_SHARED("tokenizers");
  const char* configs[] = {
      "tokenizers/qwen2.5/tokenizer_config.json",
      "tokenizers/qwen3/tokenizer_config.json",
      "tokenizers/qwen3/qwen3-30b-a3b-thinking-2507_tokenizer_config.json",
      "tokenizers/deepseek-v3/deepseek-v3_tokenizer_config.json",
      "tokenizers/deepseek-v3/deepseek-v3.1_tokenizer_config.json",
      "tokenizers/deepseek-r1/r1-distill-qwen_tokenizer_config.json",
      "tokenizers/deepseek-r1/r1-distill-qwen-14b_tokenizer_config.json",
  };
  for (const char* c : configs) {
    auto t = load_chat_template(testing::shared_data_path(c));
    EXPECT_TRUE(t.ok()) << c << ": " << t.status().to_string();
  }
  auto mixtral = load_chat_template(testing::shared_data_path("tokenizers/mixtral"));
  ASSERT_FALSE(mixtral.ok());
  EXPECT_EQ(mixtral.status().code(), StatusCode::kNotFound);
  EXPECT_NE(mixtral.status().message().find("--chat-template"), std::string::npos);
}

}  // namespace
}  // namespace strata
