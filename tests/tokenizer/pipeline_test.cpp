// Pre-tokenizers, normalizers, decoders, added tokens and the encode pipeline, on toy tokenizers
// built in memory. Expected values follow the Hugging Face tokenizers documentation and tests.
#include <gtest/gtest.h>

#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata::tok {
namespace {

std::vector<std::string> run(const PreTokenizer& pre, const std::string& text,
                             bool at_start = true) {
  PreTokens out;
  Status st = pre.run(text, at_start, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  std::vector<std::string> pieces;
  for (size_t i = 0; i < out.ranges.size(); ++i) pieces.emplace_back(out.piece(i));
  return pieces;
}

PreTokenizer split_on(const std::string& literal, SplitBehavior behavior, bool invert = false) {
  PreTokenizer pre;
  PreTokenizerStep step;
  step.kind = PreTokenizerStep::Kind::kSplit;
  step.regex = *Regex::literal(literal);
  step.behavior = behavior;
  step.invert = invert;
  pre.add(step);
  return pre;
}

using V = std::vector<std::string>;

TEST(PreTokenizerTest, SplitBehaviors) {
  const std::string s = "the-final--countdown";
  EXPECT_EQ(run(split_on("-", SplitBehavior::kRemoved), s), (V{"the", "final", "countdown"}));
  EXPECT_EQ(run(split_on("-", SplitBehavior::kIsolated), s),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(run(split_on("-", SplitBehavior::kMergedWithPrevious), s),
            (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(run(split_on("-", SplitBehavior::kMergedWithNext), s),
            (V{"the", "-final", "-", "-countdown"}));
  EXPECT_EQ(run(split_on("-", SplitBehavior::kContiguous), s),
            (V{"the", "-", "final", "--", "countdown"}));
  EXPECT_EQ(run(split_on("-", SplitBehavior::kRemoved, /*invert=*/true), s), (V{"-", "-", "-"}));
}

TEST(PreTokenizerTest, ByteLevelMetaspaceDigitsWhitespacePunctuation) {
  PreTokenizer byte_level;
  byte_level.add({.kind = PreTokenizerStep::Kind::kByteLevel,
                  .regex = *Regex::compile(kGpt2Pattern),
                  .add_prefix_space = true});
  EXPECT_EQ(run(byte_level, "Hello world's 42!!  x"),
            (V{" Hello", " world", "'s", " 42", "!!", " ", " x"}));

  PreTokenizer meta;
  meta.add({.kind = PreTokenizerStep::Kind::kMetaspace});
  EXPECT_EQ(run(meta, "Hey friend!"), (V{"▁Hey", "▁friend!"}));
  EXPECT_EQ(run(meta, "Hey   friend!"), (V{"▁Hey", "▁", "▁", "▁friend!"}));
  PreTokenizer first;
  first.add({.kind = PreTokenizerStep::Kind::kMetaspace,
             .prepend = PreTokenizerStep::Prepend::kFirst,
             .split = false});
  EXPECT_EQ(run(first, "Hey friend", true), (V{"▁Hey▁friend"}));
  EXPECT_EQ(run(first, "Hey friend", false), (V{"Hey▁friend"}));

  PreTokenizer digits, contiguous;
  digits.add({.kind = PreTokenizerStep::Kind::kDigits, .individual_digits = true});
  contiguous.add({.kind = PreTokenizerStep::Kind::kDigits});
  EXPECT_EQ(run(digits, "Call 123 please"), (V{"Call ", "1", "2", "3", " please"}));
  EXPECT_EQ(run(contiguous, "Call 123 please"), (V{"Call ", "123", " please"}));

  PreTokenizer ws, ws_split, punct;
  ws.add(
      {.kind = PreTokenizerStep::Kind::kWhitespace, .regex = *Regex::compile("\\w+|[^\\w\\s]+")});
  ws_split.add({.kind = PreTokenizerStep::Kind::kWhitespaceSplit});
  punct.add({.kind = PreTokenizerStep::Kind::kPunctuation});
  EXPECT_EQ(run(ws, "Hey man!"), (V{"Hey", "man", "!"}));
  EXPECT_EQ(run(ws_split, "Hey man!\u3000x"), (V{"Hey", "man!", "x"}));
  EXPECT_EQ(run(punct, "Hey friend!     How are you?!?"),
            (V{"Hey friend", "!", "     How are you", "?", "!", "?"}));
}

TEST(PreTokenizerTest, StepsAfterByteLevelSeeByteLevelCharacters) {
  // Digits after ByteLevel sees "²" (U+00B2) where the text had the byte 0xB2 of "²".
  PreTokenizer pre;
  pre.add({.kind = PreTokenizerStep::Kind::kByteLevel});
  pre.add({.kind = PreTokenizerStep::Kind::kDigits, .individual_digits = true});
  EXPECT_EQ(run(pre, "a1\xC2\xB2"), (V{"a", "1", "\xC2", "\xB2"}));
}

TEST(NormalizerTest, StepsRunInOrder) {
  Normalizer n;
  n.add({.kind = NormalizerStep::Kind::kNfkc});
  n.add({.kind = NormalizerStep::Kind::kLowercase});
  n.add({.kind = NormalizerStep::Kind::kStrip});
  n.add({.kind = NormalizerStep::Kind::kReplace, .pattern = " ", .content = "▁"});
  n.add({.kind = NormalizerStep::Kind::kPrepend, .pattern = "▁"});
  std::string out;
  ASSERT_TRUE(n.apply("  Ｈello ＷORLD ﬁ \t", &out).ok());
  EXPECT_EQ(out, "▁hello▁world▁fi");
  ASSERT_TRUE(n.apply("", &out).ok());
  EXPECT_EQ(out, "");  // Prepend leaves empty text alone

  Normalizer accents;
  accents.add({.kind = NormalizerStep::Kind::kNfd});
  accents.add({.kind = NormalizerStep::Kind::kStripAccents});
  ASSERT_TRUE(accents.apply("Crème Brûlée", &out).ok());
  EXPECT_EQ(out, "Creme Brulee");

  Normalizer regex;
  regex.add(
      {.kind = NormalizerStep::Kind::kReplace, .content = " ", .regex = *Regex::compile(" {2,}")});
  ASSERT_TRUE(regex.apply("a   b  c d", &out).ok());
  EXPECT_EQ(out, "a b c d");

  Normalizer spm;
  spm.add({.kind = NormalizerStep::Kind::kSpmWhitespace, .remove_extra_whitespaces = true});
  ASSERT_TRUE(spm.apply("  a   b  ", &out).ok());
  EXPECT_EQ(out, "▁a▁b");
}

std::string decode(const Decoder& d, std::vector<std::string> tokens) {
  return d.decode(std::move(tokens));
}

TEST(DecoderTest, ReferenceBehaviours) {
  Decoder fallback;
  fallback.add({.kind = DecoderStep::Kind::kByteFallback});
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0x8f>", "<0xab>", "a"}), "叫a");
  // Invalid bytes become one U+FFFD each.
  EXPECT_EQ(decode(fallback, {"<0xE5>", "<0xE5>", "<0xab>", "a"}), "\uFFFD\uFFFD\uFFFDa");
  EXPECT_EQ(decode(fallback, {"<0x61>", "<0xZZ>"}), "a<0xZZ>");

  Decoder strip;
  strip.add({.kind = DecoderStep::Kind::kStrip, .content = " ", .start = 1, .stop = 1});
  EXPECT_EQ(decode(strip, {"  Hey ", " friend", " "}), " Heyfriend");

  Decoder meta;
  meta.add({.kind = DecoderStep::Kind::kMetaspace});
  EXPECT_EQ(decode(meta, {"▁Hey", "▁friend!"}), "Hey friend!");
  EXPECT_EQ(decode(meta, {"▁▁Hey", "▁▁x"}), "Hey  x");  // every ▁ of the first token goes

  Decoder llama;  // Replace ▁ -> space, ByteFallback, Fuse, Strip one leading space
  llama.add({.kind = DecoderStep::Kind::kReplace, .pattern = "▁", .content = " "});
  llama.add({.kind = DecoderStep::Kind::kByteFallback});
  llama.add({.kind = DecoderStep::Kind::kFuse});
  llama.add({.kind = DecoderStep::Kind::kStrip, .content = " ", .start = 1});
  EXPECT_EQ(decode(llama, {"▁▁Hi", "<0xE4>", "<0xB8>", "<0xAD>", "▁there"}), " Hi中 there");

  Decoder byte_level;
  byte_level.add({.kind = DecoderStep::Kind::kByteLevel});
  EXPECT_EQ(decode(byte_level, {"Hello", "Ġw", "orld", "<|im_end|>", "ä¸", "Ń"}),
            "Hello world<|im_end|>中");
  EXPECT_EQ(decode(byte_level, {"ä¸"}), "\uFFFD");  // incomplete character
  EXPECT_EQ(decode(byte_level, {"日本"}), "日本");  // outside the byte table: kept as is
}

// A byte-level tokenizer with a few merges and added tokens, built in memory. Byte b has id b;
// merges give "he" 256, "ll" 257, "hell" 258, "hello" 259, "Ġw" 260.
std::shared_ptr<const Tokenizer> toy_byte_level(std::vector<AddedToken> added,
                                                Normalizer normalizer = {}) {
  Vocab vocab;
  for (int b = 0; b < 256; ++b) vocab.set(b, utf8_encode(byte_to_char(static_cast<uint8_t>(b))));
  std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {"Ġ", "w"}};
  for (const auto& [a, b] : merges) vocab.set(vocab.size(), a + b);
  TokenizerParts parts;
  parts.model = BpeModel::create(std::move(vocab), merges, BpeConfig{.byte_level = true}).value();
  parts.normalizer = std::move(normalizer);
  parts.pre_tokenizer.add(
      {.kind = PreTokenizerStep::Kind::kByteLevel, .regex = *Regex::compile(kGpt2Pattern)});
  parts.decoder.add({.kind = DecoderStep::Kind::kByteLevel});
  parts.added_tokens = std::move(added);
  for (const auto& [id, content] : {std::pair<int32_t, const char*>{300, "<s>"}, {301, "</s>"}}) {
    bool present = false;
    for (const auto& a : parts.added_tokens) present = present || a.id == id;
    if (!present) parts.added_tokens.push_back({.id = id, .content = content, .special = true});
  }
  parts.prefix_ids = {300};
  parts.suffix_ids = {301};
  auto t = Tokenizer::from_parts(std::move(parts));
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  return *t;
}

std::vector<int32_t> ids_of(const Tokenizer& t, const std::string& text, bool special = false) {
  auto r = t.encode(text, special);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<int32_t>{};
}

TEST(TokenizerTest, AddedTokensStripAndSingleWord) {
  auto t = toy_byte_level({
      {.id = 300, .content = "<s>", .special = true},
      {.id = 301, .content = "</s>", .special = true},
      {.id = 302, .content = "<mask>", .special = true, .lstrip = true, .rstrip = true},
      {.id = 303, .content = "ab", .single_word = true},
      {.id = 304, .content = "<s>x"},  // longest match wins over "<s>"
  });
  EXPECT_EQ(ids_of(*t, "<s>hello</s>"), (std::vector<int32_t>{300, 259, 301}));
  EXPECT_EQ(ids_of(*t, "hello"), (std::vector<int32_t>{259}));
  EXPECT_EQ(ids_of(*t, "hello", true), (std::vector<int32_t>{300, 259, 301}));
  // <mask> swallows the spaces around it.
  EXPECT_EQ(ids_of(*t, "a  <mask>  b"), (std::vector<int32_t>{'a', 302, 'b'}));
  // "ab" only as a word of its own.
  EXPECT_EQ(ids_of(*t, "ab cab ab."),
            (std::vector<int32_t>{303, ' ', 'c', 'a', 'b', ' ', 303, '.'}));
  EXPECT_EQ(ids_of(*t, "<s>x"), (std::vector<int32_t>{304}));
  EXPECT_EQ(t->decode(ids_of(*t, "<s>hi</s>"), true), "hi");
  EXPECT_EQ(t->decode(ids_of(*t, "<s>hi</s>"), false), "<s>hi</s>");
  EXPECT_EQ(t->token_to_id("<mask>"), 302);
  EXPECT_EQ(t->token_to_id("hello"), 259);
  EXPECT_FALSE(t->token_to_id("nope"));
  EXPECT_TRUE(t->is_special(302));
  EXPECT_FALSE(t->is_special(303));
}

TEST(TokenizerTest, NormalizedAddedTokensMatchNormalizedText) {
  Normalizer lower;
  lower.add({.kind = NormalizerStep::Kind::kLowercase});
  auto t =
      toy_byte_level({{.id = 300, .content = "Yesterday", .normalized = true}}, std::move(lower));
  EXPECT_EQ(ids_of(*t, "YESTERDAY"), (std::vector<int32_t>{300}));
  EXPECT_EQ(ids_of(*t, "a yesterday"), (std::vector<int32_t>{'a', ' ', 300}));
}

TEST(TokenizerTest, InvalidUtf8IsAClearError) {
  auto t = toy_byte_level({});
  for (std::string bad : {std::string("ok\xFF"), std::string("\xC3"), std::string("a\xED\xA0\x80"),
                          std::string("\xF8\x88\x80\x80\x80")}) {
    auto r = t->encode(bad);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("UTF-8"), std::string::npos);
    EXPECT_NE(r.status().message().find("offset"), std::string::npos);
  }
  EXPECT_TRUE(t->encode("").ok());
  EXPECT_EQ(*t->encode("", true), (std::vector<int32_t>{300, 301}));
}

TEST(TokenizerTest, DecodeIgnoresOutOfRangeIds) {
  auto t = toy_byte_level({});
  std::vector<int32_t> ids = {-5, 'h', 1 << 30, 'i'};
  EXPECT_EQ(t->decode(ids), "hi");
}

TEST(TokenizerTest, CleanUpTokenizationSpaces) {
  EXPECT_EQ(clean_up_tokenization("Hi , you 're here . It is n't ! Yes ?"),
            "Hi, you're here. It isn't! Yes?");
}

}  // namespace
}  // namespace strata::tok
