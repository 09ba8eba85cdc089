// Real vocabularies: decode(encode(s)) == s for random Unicode strings, and streaming
// detokenization of real token sequences adding up to the one-shot decode.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "core/strings.h"
#include "test_util.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/loaders.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace strata {
namespace {

using testing::shared_data_path;

// Code point ranges the random strings draw from: ASCII (with controls), Latin-1, combining
// marks, Greek/Cyrillic, Arabic, Devanagari, Thai, Hangul, CJK, kana, emoji and symbols, ZWJ and
// variation selectors, private use, astral planes.
const std::pair<char32_t, char32_t> kRanges[] = {
    {0x00, 0x7F},     {0x80, 0xFF},     {0x300, 0x36F},      {0x370, 0x4FF},
    {0x600, 0x6FF},   {0x900, 0x97F},   {0xE00, 0xE7F},      {0xAC00, 0xD7A3},
    {0x4E00, 0x9FFF}, {0x3040, 0x30FF}, {0x1F300, 0x1FAFF},  {0x2000, 0x206F},
    {0xFE00, 0xFE0F}, {0xE000, 0xF8FF}, {0x10000, 0x10FFFF}, {0x20, 0x7E},
};

std::string random_text(Rng& rng, size_t n, bool allow_lt) {
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    const auto& [lo, hi] = kRanges[rng.below(std::size(kRanges))];
    char32_t c = lo + static_cast<char32_t>(rng.below(hi - lo + 1));
    if (c >= 0xD800 && c <= 0xDFFF) continue;  // surrogates are not scalar values
    if (!allow_lt && c == '<') continue;
    tok::utf8_append(&s, c);
  }
  return s;
}

std::shared_ptr<const Tokenizer> load(const std::string& rel) {
  auto t = Tokenizer::load(shared_data_path(rel));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return t.ok() ? *t : nullptr;
}

std::shared_ptr<const Tokenizer> load_llama3() {
  tok::BpeFilesOptions options;
  options.preset = "llama3";
  auto parts =
      tok::load_bpe_files(shared_data_path("tokenizers/llama3/llama3.2_encoder.json"),
                          shared_data_path("tokenizers/llama3/llama3.2_vocab.bpe"), options);
  EXPECT_TRUE(parts.ok()) << parts.status().to_string();
  return Tokenizer::from_parts(std::move(parts).value()).value();
}

void check_round_trips(const Tokenizer& t, bool nfc, bool allow_lt, uint64_t seed) {
  Rng rng(seed);
  for (int i = 0; i < 300; ++i) {
    std::string s = random_text(rng, 1 + rng.below(i < 250 ? 24 : 400), allow_lt);
    auto ids = t.encode(s, false);
    ASSERT_TRUE(ids.ok()) << ids.status().to_string();
    std::string expected = s;
    if (nfc) {
      ASSERT_TRUE(tok::normalize_utf8(tok::NormalForm::kNFC, s, &expected).ok());
    }
    ASSERT_EQ(t.decode(*ids, false), expected) << "seed " << seed << " case " << i;
  }
}

TEST(RoundTripTest, ByteLevelVocabularies) {
  STRATA_REQUIRE_SHARED("tokenizers/gpt2/vocab.json");
  check_round_trips(*load("tokenizers/gpt2"), false, true, 1);
  check_round_trips(*load("tokenizers/qwen2.5"), /*nfc=*/true, true, 2);  // Qwen normalises NFC
  check_round_trips(*load_llama3(), false, true, 3);
}

TEST(RoundTripTest, SentencePieceVocabularies) {
  STRATA_REQUIRE_SHARED("tokenizers/llama2/tokenizer.model");
  // '<' is left out: "<s>" written in the text is the BOS token, whose segment split moves the
  // dummy-prefix space (as the reference does).
  check_round_trips(*load("tokenizers/llama2/tokenizer.model"), false, false, 4);
  check_round_trips(*load("tokenizers/mixtral"), false, false, 5);
  check_round_trips(*load("models/stories260K.gguf"), false, false, 6);
}

// Streams the ids of real text after a prompt; the pieces add up to the continuation.
void check_stream(const std::shared_ptr<const Tokenizer>& t, const std::string& prompt,
                  const std::string& text) {
  auto p = t->encode(prompt, true);
  auto g = t->encode(text, false);
  ASSERT_TRUE(p.ok() && g.ok());
  for (bool skip : {true, false}) {
    IncrementalDetokenizer d(t, *p, skip);
    std::string joined;
    for (int32_t id : *g) {
      std::string piece = d.add(id);
      EXPECT_TRUE(is_valid_utf8(piece));
      joined += piece;
    }
    joined += d.flush();
    std::vector<int32_t> all = *p;
    all.insert(all.end(), g->begin(), g->end());
    std::string head = t->decode(*p, skip), full = t->decode(all, skip);
    ASSERT_EQ(full.substr(0, head.size()), head);
    EXPECT_EQ(joined, full.substr(head.size())) << text;
    EXPECT_EQ(d.text(), joined);
  }
}

TEST(RoundTripTest, StreamingMatchesOneShotDecode) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  Rng rng(8);
  std::vector<std::string> texts = {
      " Once upon a time, 世界 🙂 <|im_end|>", "\n\n  indented code:\n\tx = 1",
      "Ünïcödé — “quotes” … 👨‍👩‍👧‍👦 🇯🇵"};
  for (int i = 0; i < 20; ++i) texts.push_back(random_text(rng, 30, false));
  for (const char* rel :
       {"tokenizers/qwen2.5", "tokenizers/gpt2", "tokenizers/llama2/tokenizer.model",
        "tokenizers/mixtral", "models/stories260K-hf"}) {
    auto t = load(rel);
    ASSERT_TRUE(t);
    for (const auto& text : texts) check_stream(t, "Hello", text);
    check_stream(t, "", "Hello world");
  }
}

}  // namespace
}  // namespace strata
