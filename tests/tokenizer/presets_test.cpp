// Named BPE presets (every tokenizer.ggml.pre name llama.cpp writes) and the WordPiece pieces
// (model, BERT text cleaning, decoder), on toy inputs built in memory.
#include <gtest/gtest.h>

#include "core/strings.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/presets.h"
#include "tokenizer/wordpiece.h"

namespace strata::tok {
namespace {

using V = std::vector<std::string>;

// Normalises `text` with the preset's normalizer and returns its pre-tokens (as raw text).
V pre_tokens(const BpePreset& p, const std::string& text) {
  std::string normalized;
  Status st = p.normalizer.apply(text, &normalized);
  EXPECT_TRUE(st.ok()) << st.to_string();
  PreTokens out;
  st = p.pre_tokenizer.run(normalized, true, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  V pieces;
  for (size_t i = 0; i < out.ranges.size(); ++i) pieces.emplace_back(out.piece(i));
  return pieces;
}

BpePreset preset(const std::string& name) {
  auto p = bpe_preset(name);
  EXPECT_TRUE(p.ok()) << name << ": " << p.status().to_string();
  return p.ok() ? std::move(p).value() : BpePreset{};
}

TEST(BpePresetTest, EveryNameCompilesAndItsPiecesCoverTheText) {
  // Scripts, digits, punctuation, newlines and runs of spaces: every preset splits this without
  // an error, and (no preset removes anything) its pieces spell the normalised text in order.
  const std::string text =
      "Hello World! I've 1234567 apples,\n\n  naïve café  \t x=y+1; "
      "\xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C "           // 你好世界
      "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82 "           // Привет
      "\xEA\xB0\x80\xEB\x82\x98 \xE3\x81\x8B\xE3\x81\xAA "          // 가나 かな
      "\xE1\xBD\xBD\xE1\xBE\xBE \xF0\x9F\xA6\x99...\xE2\x80\xA6!";  // ώι 🦙...…!
  for (const std::string& name : bpe_preset_names()) {
    SCOPED_TRACE(name);
    BpePreset p = preset(name);
    std::string normalized;
    ASSERT_TRUE(p.normalizer.apply(text, &normalized).ok());
    V pieces = pre_tokens(p, text);
    EXPECT_GE(pieces.size(), 3u);
    std::string joined;
    for (const auto& piece : pieces) {
      EXPECT_FALSE(piece.empty());
      joined += piece;
    }
    EXPECT_EQ(joined, normalized);
  }
}

TEST(BpePresetTest, AliasesShareTheirFamilysPipeline) {
  EXPECT_EQ(preset("llama-bpe").name, "llama3");
  EXPECT_TRUE(preset("llama-bpe").ignore_merges);
  EXPECT_TRUE(preset("llama-bpe").add_bos);
  EXPECT_EQ(preset("refact").name, "starcoder");
  EXPECT_EQ(preset("command-r").name, "starcoder");
  EXPECT_EQ(preset("poro-chat").name, "bloom");
  EXPECT_EQ(preset("llama4").name, "gpt-4o");
  EXPECT_EQ(preset("hunyuan-dense").name, "deepseek-v3");
  EXPECT_FALSE(preset("dbrx").ignore_merges);
}

TEST(BpePresetTest, UnknownNameListsTheKnownOnes) {
  auto p = bpe_preset("no-such-family");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("no-such-family"), std::string::npos);
  EXPECT_NE(p.status().message().find("deepseek-llm"), std::string::npos);
  EXPECT_NE(p.status().message().find("falcon"), std::string::npos);
}

TEST(BpePresetTest, DeepSeekLlmLetterClass) {
  BpePreset p = preset("deepseek-llm");
  // Letters of the class (U+00C0, U+00D6) join a word with one leading space; U+0294, between
  // two of its ranges, does not. (Its CJK pattern's range U+0800-U+4E00 also takes Greek
  // Extended letters such as U+1F7D, so those end up in pieces of their own.)
  EXPECT_EQ(pre_tokens(p, "x \xC3\x80\xC3\x96"), (V{"x", " \xC3\x80\xC3\x96"}));
  EXPECT_EQ(pre_tokens(p,
                       "ab \xCA\x94"
                       "cd"),
            (V{"ab", " \xCA\x94", "cd"}));
  EXPECT_EQ(pre_tokens(p, "ab\xE1\xBD\xBD"), (V{"ab", "\xE1\xBD\xBD"}));
  EXPECT_EQ(pre_tokens(p, "x12\ny"), (V{"x", "12", "\n", "y"}));
  EXPECT_EQ(pre_tokens(p, "Hi, you  "), (V{"Hi", ",", " you", "  "}));
}

TEST(BpePresetTest, FalconPunctuationAndDigits) {
  BpePreset p = preset("falcon");
  EXPECT_EQ(pre_tokens(p, "x == 12345"), (V{"x", " ", "==", " ", "123", "45"}));
  EXPECT_EQ(pre_tokens(p, "a,b"), (V{"a", ",", "b"}));
}

TEST(BpePresetTest, DigitGroupsFromTheRight) {
  EXPECT_EQ(pre_tokens(preset("superbpe"), "1234567"), (V{"1", "234", "567"}));
  EXPECT_EQ(pre_tokens(preset("afmoe"), "12345 x"), (V{"12", "345", " x"}));
  EXPECT_EQ(pre_tokens(preset("tiny_aya"), "1234"), (V{"1", "234"}));
}

TEST(BpePresetTest, CaseAwareAndScriptAwareSplits) {
  EXPECT_EQ(pre_tokens(preset("gpt-4o"), "HelloWorld's"), (V{"Hello", "World's"}));
  EXPECT_EQ(pre_tokens(preset("tekken"), "HelloWorld's"), (V{"Hello", "World", "'s"}));
  // Kimi K2: Han runs are never part of a word.
  EXPECT_EQ(pre_tokens(preset("kimi-k2"), "Hello\xE4\xB8\x96\xE7\x95\x8C"),
            (V{"Hello", "\xE4\xB8\x96\xE7\x95\x8C"}));
  EXPECT_EQ(pre_tokens(preset("bloom"), "Hello, world!"), (V{"Hello", ",", " world", "!"}));
}

Vocab toy_vocab(const V& pieces) {
  Vocab v;
  for (size_t i = 0; i < pieces.size(); ++i) v.set(static_cast<int32_t>(i), pieces[i]);
  return v;
}

std::vector<int32_t> wp_encode(const WordPieceModel& m, const std::string& word) {
  std::vector<int32_t> ids;
  m.encode(word, &ids);
  return ids;
}

TEST(WordPieceTest, LongestPiecesFirstAndWholeWordUnknown) {
  WordPieceConfig config;
  config.max_input_chars_per_word = 12;
  auto m = WordPieceModel::create(
      toy_vocab({"[UNK]", "un", "una", "##aff", "##a", "##able", "##ff", "x", "\xC3\xA9", "##t"}),
      config);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const WordPieceModel& wp = **m;
  EXPECT_EQ(wp_encode(wp, "unaffable"), (std::vector<int32_t>{2, 6, 5}));  // una ##ff ##able
  EXPECT_EQ(wp_encode(wp, "x"), (std::vector<int32_t>{7}));
  EXPECT_EQ(wp_encode(wp, "\xC3\xA9t"), (std::vector<int32_t>{8, 9}));   // é ##t
  EXPECT_EQ(wp_encode(wp, "unq"), (std::vector<int32_t>{0}));            // no "##q": all unknown
  EXPECT_EQ(wp_encode(wp, "ff"), (std::vector<int32_t>{0}));             // "##ff" only continues
  EXPECT_EQ(wp_encode(wp, "unaffableable"), (std::vector<int32_t>{0}));  // 13 > 12 characters
  EXPECT_EQ(wp.describe(), "WordPiece");
}

TEST(WordPieceTest, UnknownTokenMustBeInTheVocabulary) {
  auto m = WordPieceModel::create(toy_vocab({"a", "##b"}), WordPieceConfig{});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("[UNK]"), std::string::npos);
}

TEST(WordPieceTest, BertCleaningAndDecoding) {
  Normalizer n;
  n.add(NormalizerStep{.kind = NormalizerStep::Kind::kBertClean});
  std::string out;
  // Tab and NEL -> space; NUL, U+FFFD, a zero-width space (Cf) and a C1 control (Cc)
  // dropped; a CJK ideograph spaced.
  const std::string in = std::string("a\tb") + '\0' + "c\xEF\xBF\xBD\xE2\x80\x8B\xC2\x80" +
                         "\xC2\x85" + "d\xE4\xB8\xAD";
  ASSERT_TRUE(n.apply(in, &out).ok());
  EXPECT_EQ(out, "a bc d \xE4\xB8\xAD ");

  Decoder d;
  d.add(DecoderStep{.kind = DecoderStep::Kind::kWordPiece});
  EXPECT_EQ(d.decode({"un", "##aff", "##able", "world", ".", "it", "'s", "[UNK]"}),
            "unaffable world. it's [UNK]");
}

}  // namespace
}  // namespace strata::tok
