// Golden tests: real vocabularies from ../shared/data against the reference implementations'
// recorded outputs (Hugging Face transformers/tokenizers, SentencePiece/llama2.c, ollama, Meta).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/json.h"
#include "test_util.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"

namespace strata {
namespace {

using testing::shared_data_path;

Json load_json(const std::string& rel) {
  auto j = read_json_file(shared_data_path(rel));
  EXPECT_TRUE(j.ok()) << j.status().to_string();
  return j.ok() ? *j : Json();
}

std::shared_ptr<const Tokenizer> load_tok(const std::string& rel) {
  auto t = Tokenizer::load(shared_data_path(rel));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

std::vector<int32_t> encode(const Tokenizer& t, const std::string& text, bool special) {
  auto ids = t.encode(text, special);
  EXPECT_TRUE(ids.ok()) << ids.status().to_string();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

std::vector<std::string> pieces(const Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<std::string> out;
  for (int32_t id : ids) out.push_back(t.id_to_piece(id));
  return out;
}

// Llama-3 from Meta's BPE files (encoder.json + vocab.bpe) with the Llama-3 split pattern and the
// special tokens the vectors use.
std::shared_ptr<const Tokenizer> load_llama3(bool add_bos) {
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  tok::BpeFilesOptions options;
  options.preset = "llama3";
  for (const auto& [content, id] : vectors["special_tokens"].items()) {
    tok::AddedToken t;
    t.id = id.get<int32_t>();
    t.content = content;
    t.special = true;
    options.added_tokens.push_back(t);
  }
  if (add_bos) options.prefix_ids = {128000};
  auto parts =
      tok::load_bpe_files(shared_data_path("tokenizers/llama3/llama3.2_encoder.json"),
                          shared_data_path("tokenizers/llama3/llama3.2_vocab.bpe"), options);
  EXPECT_TRUE(parts.ok()) << parts.status().to_string();
  if (!parts.ok()) return nullptr;
  auto t = Tokenizer::from_parts(std::move(parts).value());
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

// swift-transformers' tokenizer_tests.json entries for one model.
void check_swift_cases(const Tokenizer& t, const std::string& model, bool clean_up) {
  Json all = load_json("tokenizer-tests/swift-transformers/tokenizer_tests.json");
  ASSERT_TRUE(all.contains(model));
  int n = 0;
  for (const auto& c : all[model]) {
    std::string input = c["input"];
    auto expected = c["encoded"]["input_ids"].get<std::vector<int32_t>>();
    auto ids = encode(t, input, true);
    EXPECT_EQ(ids, expected) << model << " input: " << input;
    EXPECT_EQ(t.decode(ids, false, clean_up), c["decoded_with_special"].get<std::string>())
        << model << " input: " << input;
    EXPECT_EQ(t.decode(ids, true, clean_up), c["decoded_without_special"].get<std::string>())
        << model << " input: " << input;
    ++n;
  }
  EXPECT_GE(n, 18);
}

// swift-transformers' multilingual baselines (transformers 4.57.1).
void check_multilingual(const Tokenizer& t, const std::string& baseline) {
  STRATA_REQUIRE_SHARED("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  Json base = load_json("tokenizer-tests/swift-transformers-multilingual/baselines/" + baseline);
  int n = 0;
  for (const auto& in : inputs["inputs"]) {
    std::string id = in["id"], text = in["text"];
    ASSERT_TRUE(base["entries"].contains(id)) << id;
    const Json& e = base["entries"][id];
    auto ids = encode(t, text, true);
    EXPECT_EQ(ids, e["input_ids"].get<std::vector<int32_t>>()) << baseline << " " << id;
    EXPECT_EQ(pieces(t, ids), e["tokens"].get<std::vector<std::string>>()) << baseline << " " << id;
    EXPECT_EQ(t.decode(ids, false), e["decoded_with_special"].get<std::string>()) << id;
    EXPECT_EQ(t.decode(ids, true), e["decoded_skip_special"].get<std::string>()) << id;
    ++n;
  }
  EXPECT_EQ(n, 30);
}

// swift-transformers' *_encoded.json: one long French text with pieces and ids.
void check_encoded_file(const Tokenizer& t, const std::string& file, bool add_special) {
  Json j = load_json("tokenizer-tests/swift-transformers/" + file);
  std::string text = j["text"];
  auto expected = j["token_ids"].get<std::vector<int32_t>>();
  auto ids = encode(t, text, add_special);
  EXPECT_EQ(ids, expected) << file;
  std::vector<std::string> bpe = j["bpe_tokens"];
  std::vector<int32_t> body(ids.begin() + (ids.size() - bpe.size()), ids.end());
  EXPECT_EQ(pieces(t, body), bpe) << file;
  // decoded_text keeps special tokens (e.g. "<s> Fatouville...").
  EXPECT_EQ(t.decode(ids, false), j["decoded_text"].get<std::string>()) << file;
}

TEST(GoldenGpt2, SwiftTransformersVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/gpt2/vocab.json");
  auto t = load_tok("tokenizers/gpt2");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 50257);
  EXPECT_EQ(t->eos_token_id(), 50256);
  EXPECT_EQ(t->info().format, "vocab.json+merges.txt");
  // distilgpt2 shares GPT-2's tokenizer; its decoded strings had clean_up_tokenization applied.
  check_swift_cases(*t, "distilgpt2", /*clean_up=*/true);
  check_encoded_file(*t, "gpt2_encoded_tokens.json", false);
  check_multilingual(*t, "openai-community__gpt2.json");
  // The special token written in text is one token, as transformers matches special tokens.
  EXPECT_EQ(encode(*t, "a<|endoftext|>b", true), (std::vector<int32_t>{64, 50256, 65}));
}

TEST(GoldenQwen25, MultilingualBaseline) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto t = load_tok("tokenizers/qwen2.5");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 151665);
  check_multilingual(*t, "Qwen__Qwen2.5-0.5B.json");
  // Chat-format special tokens are single tokens; eos is <|im_end|> for the Instruct config.
  auto ids = encode(*t, "<|im_start|>user\nHi<|im_end|>", true);
  EXPECT_EQ(ids, (std::vector<int32_t>{151644, 872, 198, 13048, 151645}));
  EXPECT_EQ(t->eos_token_id(), 151645);
  EXPECT_TRUE(t->is_special(151645));
  EXPECT_FALSE(t->is_special(151657));  // <tool_call> is an added, non-special token
  EXPECT_EQ(t->decode(ids, true), "user\nHi");
  EXPECT_FALSE(t->chat_template().empty());
}

TEST(GoldenLlama3, OllamaAndMetaVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3.2_encoder.json");
  auto t = load_llama3(/*add_bos=*/false);
  ASSERT_TRUE(t);
  Json vectors = load_json("tokenizer-tests/llama3_tokenizer_vectors.json");
  int n = 0;
  for (const auto& c : vectors["encode"]) {
    std::string text = c["text"];
    bool with_bos_eos = c.value("with_bos_eos", false);
    auto ids = encode(*t, text, false);
    if (with_bos_eos) {
      ids.insert(ids.begin(), 128000);
      ids.push_back(128001);
    }
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << text;
    ++n;
  }
  EXPECT_GT(n, 20);
}

TEST(GoldenLlama3, SwiftTransformersVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama3/llama3.2_encoder.json");
  auto t = load_llama3(/*add_bos=*/true);
  ASSERT_TRUE(t);
  // Llama-3.2's tokenizer_config.json sets clean_up_tokenization_spaces.
  check_swift_cases(*t, "pcuenq/Llama-3.2-1B-Instruct-tokenizer", /*clean_up=*/true);
  check_encoded_file(*t, "llama_3.2_encoded.json", true);
}

TEST(GoldenLlama2, SentencePieceModelVectors) {
  STRATA_REQUIRE_SHARED("tokenizers/llama2/tokenizer.model");
  auto t = load_tok("tokenizers/llama2/tokenizer.model");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  EXPECT_EQ(t->info().model, "SentencePiece BPE");
  Json vectors = load_json("tokenizer-tests/llama2_tokenizer_vectors.json");
  for (const auto& c : vectors["encode"]) {
    EXPECT_EQ(encode(*t, c["text"], true), c["ids"].get<std::vector<int32_t>>()) << c["text"];
  }
  check_swift_cases(*t, "coreml-projects/Llama-2-7b-chat-coreml", /*clean_up=*/false);
  check_encoded_file(*t, "llama_encoded.json", true);
  // TinyLlama uses the Llama-2 vocabulary.
  check_multilingual(*t, "TinyLlama__TinyLlama-1.1B-Chat-v1.0.json");
}

TEST(GoldenStories260K, TokenizerJsonMatchesGoldenPrompts) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  auto t = load_tok("models/stories260K-hf");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 512);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  Json golden = load_json("golden/stories260K.json");
  int n = 0;
  for (const auto& c : golden["cases"]) {
    std::string prompt = c["prompt"];
    auto expected = c["prompt_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(encode(*t, prompt, true), expected) << "prompt '" << prompt << "'";
    // The continuation detokenised after the prompt is the recorded completion_text. (With an
    // empty prompt the recording keeps llama.cpp's leading space, which HF's decode strips.)
    if (!prompt.empty()) {
      std::vector<int32_t> all = expected;
      auto gen = c["generated_ids"].get<std::vector<int32_t>>();
      all.insert(all.end(), gen.begin(), gen.end());
      std::string head = t->decode(expected, true);
      std::string full = t->decode(all, true);
      ASSERT_EQ(full.substr(0, head.size()), head);
      EXPECT_EQ(full.substr(head.size()), c["completion_text"].get<std::string>()) << prompt;
    }
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(GoldenMixtral, TokenizerJsonLoadsAndRoundTrips) {
  STRATA_REQUIRE_SHARED("tokenizers/mixtral/tokenizer.json");
  auto t = load_tok("tokenizers/mixtral");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 32000);
  EXPECT_EQ(t->bos_token_id(), 1);
  EXPECT_EQ(t->eos_token_id(), 2);
  EXPECT_TRUE(t->info().add_bos);
  Json inputs = load_json("tokenizer-tests/swift-transformers-multilingual/inputs.json");
  std::vector<std::string> texts = {
      "Hello world", "  two leading spaces", "trailing  ", "line\nbreaks\r\n\ttabs", "", "x"};
  for (const auto& in : inputs["inputs"]) texts.push_back(in["text"]);
  for (const auto& text : texts) {
    auto ids = encode(*t, text, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(t->decode(ids, true), text);
  }
  // Known pieces: "▁Hello" and byte fallback for characters outside the vocabulary.
  auto ids = encode(*t, "Hello 🦙", false);
  EXPECT_EQ(pieces(*t, ids).front(), "▁Hello");
  EXPECT_EQ(t->decode(ids, true), "Hello 🦙");
}

}  // namespace
}  // namespace strata
