// IncrementalDetokenizer on toy tokenizers: complete UTF-8 only, byte tokens assembled, the
// SentencePiece continuation space kept, special tokens skipped or kept, and the streamed pieces
// adding up to the one-shot decode.
#include "tokenizer/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include "core/rng.h"
#include "core/strings.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/sp_models.h"
#include "tokenizer/tokenizer_parts.h"

namespace strata {
namespace {

using tok::AddedToken;
using tok::TokenizerParts;

// Byte-level: id b is byte b; 256 = "<|end|>" (special).
std::shared_ptr<const Tokenizer> byte_tokenizer() {
  tok::Vocab vocab;
  for (int b = 0; b < 256; ++b)
    vocab.set(b, tok::utf8_encode(tok::byte_to_char(static_cast<uint8_t>(b))));
  TokenizerParts parts;
  parts.model = tok::BpeModel::create(vocab, {}, tok::BpeConfig{.byte_level = true}).value();
  parts.decoder.add({.kind = tok::DecoderStep::Kind::kByteLevel});
  parts.added_tokens = {{.id = 256, .content = "<|end|>", .special = true}};
  return Tokenizer::from_parts(std::move(parts)).value();
}

// SentencePiece style: pieces ▁, a..e, ▁hello, ▁world, byte fallback; "<s>" special.
std::shared_ptr<const Tokenizer> spm_tokenizer() {
  std::vector<tok::SpPiece> pieces = {{"<unk>", 0, tok::SpPiece::Type::kUnknown},
                                      {"<s>", 0, tok::SpPiece::Type::kControl}};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    pieces.push_back({name, 0, tok::SpPiece::Type::kByte});
  }
  for (std::string p : {"▁", "h", "e", "l", "o", "w", "r", "d", "▁h", "▁w", "ll", "▁he", "▁hell",
                        "▁hello", "or", "▁wor", "ld", "▁world"}) {
    pieces.push_back({p, -static_cast<float>(pieces.size()), tok::SpPiece::Type::kNormal});
  }
  TokenizerParts parts;
  parts.model = tok::SpmBpeModel::create(pieces, 0, true).value();
  parts.normalizer.add({.kind = tok::NormalizerStep::Kind::kSpmWhitespace});
  parts.decoder.add({.kind = tok::DecoderStep::Kind::kReplace, .pattern = "▁", .content = " "});
  parts.decoder.add({.kind = tok::DecoderStep::Kind::kByteFallback});
  parts.decoder.add({.kind = tok::DecoderStep::Kind::kFuse});
  parts.decoder.add({.kind = tok::DecoderStep::Kind::kStrip, .content = " ", .start = 1});
  parts.added_tokens = {{.id = 1, .content = "<s>", .special = true}};
  parts.prefix_ids = {1};
  return Tokenizer::from_parts(std::move(parts)).value();
}

std::vector<std::string> stream(const std::shared_ptr<const Tokenizer>& t,
                                const std::vector<int32_t>& prompt, const std::vector<int32_t>& gen,
                                bool skip) {
  IncrementalDetokenizer d(t, prompt, skip);
  std::vector<std::string> out;
  for (int32_t id : gen) out.push_back(d.add(id));
  out.push_back(d.flush());
  return out;
}

// The continuation text: decode(prompt + gen) without decode(prompt) in front.
std::string continuation(const Tokenizer& t, std::vector<int32_t> prompt,
                         const std::vector<int32_t>& gen, bool skip) {
  std::string head = t.decode(prompt, skip);
  prompt.insert(prompt.end(), gen.begin(), gen.end());
  std::string full = t.decode(prompt, skip);
  EXPECT_EQ(full.substr(0, head.size()), head);
  return full.substr(head.size());
}

TEST(IncrementalDetokenizerTest, HoldsBackIncompleteCharacters) {
  auto t = byte_tokenizer();
  // "é" = C3 A9 and "🙂" = F0 9F 99 82, one byte per token.
  std::vector<int32_t> gen = {'a', 0xC3, 0xA9, 0xF0, 0x9F, 0x99, 0x82, '!'};
  auto pieces = stream(t, {}, gen, true);
  EXPECT_EQ(pieces, (std::vector<std::string>{"a", "", "é", "", "", "", "🙂", "!", ""}));
  for (const auto& p : pieces) EXPECT_TRUE(is_valid_utf8(p));
}

TEST(IncrementalDetokenizerTest, SpecialTokensSkippedOrKept) {
  auto t = byte_tokenizer();
  std::vector<int32_t> gen = {'h', 'i', 256, '.'};
  EXPECT_EQ(join(stream(t, {}, gen, true), ""), "hi.");
  EXPECT_EQ(join(stream(t, {}, gen, false), ""), "hi<|end|>.");
}

TEST(IncrementalDetokenizerTest, FlushReleasesAnUnfinishedCharacter) {
  auto t = byte_tokenizer();
  auto pieces = stream(t, {}, {'o', 'k', 0xE4, 0xB8}, true);
  EXPECT_EQ(join(pieces, ""), "ok\uFFFD");
  EXPECT_EQ(pieces.back(), "\uFFFD");
}

TEST(IncrementalDetokenizerTest, SentencePieceContinuationKeepsTheSpace) {
  auto t = spm_tokenizer();
  auto prompt = *t->encode("hello");  // [<s>, ▁hello]
  auto gen = *t->encode("world", false);
  ASSERT_EQ(t->id_to_piece(gen[0]), "▁world");
  auto pieces = stream(t, prompt, gen, true);
  EXPECT_EQ(pieces.front(), " world");
  EXPECT_EQ(join(pieces, ""), continuation(*t, prompt, gen, true));
  // With only BOS before, the first word has no space, as decode() of the generation gives.
  EXPECT_EQ(join(stream(t, {1}, gen, true), ""), "world");
  // Byte-fallback tokens assemble into one character.
  auto emoji = *t->encode("🙂", false);  // ▁ then four <0x..> pieces
  auto parts = stream(t, prompt, emoji, true);
  EXPECT_EQ(join(parts, ""), " 🙂");
  for (const auto& p : parts)
    EXPECT_TRUE(p.empty() || p == " " || p == "🙂" || p == " 🙂") << p;
}

// Random ids for the byte-level tokenizer. For the SentencePiece one, random pieces and whole
// characters spelled in byte-fallback tokens: the reference turns every byte of a byte-token run
// that is not valid UTF-8 as a whole into U+FFFD, so a stream can only match it once the run is
// known to be valid (which is what models generate).
std::vector<int32_t> random_ids(const Tokenizer& t, Rng& rng, size_t n, bool spm) {
  std::vector<int32_t> ids;
  while (ids.size() < n) {
    if (!spm) {
      ids.push_back(static_cast<int32_t>(rng.below(t.vocab_size())));
    } else if (rng.below(8) == 0) {
      ids.push_back(1);  // <s>, between characters
    } else if (rng.below(3) == 0) {
      static const char32_t kChars[] = {U'é', U'中', U'🙂', U'\n', U'ß'};
      for (char c : tok::utf8_encode(kChars[rng.below(5)]))
        ids.push_back(2 + static_cast<uint8_t>(c));
    } else {
      ids.push_back(static_cast<int32_t>(258 + rng.below(t.vocab_size() - 258)));
    }
  }
  return ids;
}

TEST(IncrementalDetokenizerTest, RandomStreamsAddUpToTheOneShotDecode) {
  Rng rng(3);
  for (bool spm : {false, true}) {
    auto t = spm ? spm_tokenizer() : byte_tokenizer();
    for (int iter = 0; iter < 300; ++iter) {
      std::vector<int32_t> prompt = random_ids(*t, rng, rng.below(8), spm);
      std::vector<int32_t> gen = random_ids(*t, rng, 1 + rng.below(40), spm);
      bool skip = iter % 2 == 0;
      auto pieces = stream(t, prompt, gen, skip);
      std::string joined = join(pieces, "");
      // Compare where the prompt's decode is a prefix of the full decode (a prompt that ends
      // in the middle of a character is checked separately below).
      std::string head = t->decode(prompt, skip);
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), gen.begin(), gen.end());
      std::string full = t->decode(all, skip);
      if (full.compare(0, head.size(), head) == 0) {
        EXPECT_EQ(joined, full.substr(head.size())) << "spm " << spm << " iter " << iter;
      }
      for (size_t i = 0; i + 1 < pieces.size(); ++i) EXPECT_TRUE(is_valid_utf8(pieces[i]));
    }
  }
}

TEST(IncrementalDetokenizerTest, PromptEndingInsideACharacter) {
  auto t = byte_tokenizer();
  // The prompt ends with the first two bytes of "中" (E4 B8 AD); the model completes it.
  auto pieces = stream(t, {'x', 0xE4, 0xB8}, {0xAD, 'y'}, true);
  EXPECT_EQ(join(pieces, ""), "中y");
}

}  // namespace
}  // namespace strata
