// The BPE, SentencePiece-BPE and Unigram models against plain reference implementations written
// here (textbook algorithms, no shortcuts), on random vocabularies and words.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/rng.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/sp_models.h"
#include "tokenizer/unicode.h"

namespace strata::tok {
namespace {

using Merges = std::vector<std::pair<std::string, std::string>>;

// Splits UTF-8 into characters.
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < s.size();) {
    size_t n = utf8_len(static_cast<uint8_t>(s[pos]));
    out.push_back(s.substr(pos, n));
    pos += n;
  }
  return out;
}

// Textbook BPE (GPT-2's bpe()): merge every occurrence of the lowest-ranked pair, repeat.
std::vector<std::string> reference_bpe(std::vector<std::string> word, const Merges& merges) {
  std::map<std::pair<std::string, std::string>, size_t> rank;
  for (size_t i = 0; i < merges.size(); ++i) rank[merges[i]] = i;  // later duplicates win
  for (;;) {
    size_t best = std::numeric_limits<size_t>::max();
    std::pair<std::string, std::string> pair;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto it = rank.find({word[i], word[i + 1]});
      if (it != rank.end() && it->second < best) {
        best = it->second;
        pair = it->first;
      }
    }
    if (best == std::numeric_limits<size_t>::max()) return word;
    std::vector<std::string> next;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == pair.first && word[i + 1] == pair.second) {
        next.push_back(pair.first + pair.second);
        ++i;
      } else {
        next.push_back(word[i]);
      }
    }
    word = std::move(next);
  }
}

// Random merges over `alphabet`: each merge joins two existing tokens into a new one.
void random_merges(Rng& rng, const std::vector<std::string>& alphabet, int n, Vocab* vocab,
                   Merges* merges) {
  std::vector<std::string> tokens = alphabet;
  for (const auto& t : tokens) vocab->set(vocab->size(), t);
  std::set<std::string> known(tokens.begin(), tokens.end());
  for (int tries = 0; static_cast<int>(merges->size()) < n && tries < 100000; ++tries) {
    std::string a = tokens[rng.below(tokens.size())];
    std::string b = tokens[rng.below(tokens.size())];
    if (a.size() + b.size() > 12 || known.count(a + b)) continue;
    merges->emplace_back(a, b);
    known.insert(a + b);
    tokens.push_back(a + b);
    vocab->set(vocab->size(), a + b);
  }
}

TEST(BpeModelTest, MatchesTextbookBpeOnRandomWordsShortAndLong) {
  Rng rng(7);
  std::vector<std::string> alphabet = {"a", "b", "c", "d", "é", "世"};
  Vocab vocab;
  Merges merges;
  random_merges(rng, alphabet, 80, &vocab, &merges);
  merges.push_back(merges[3]);  // a repeated merge takes its later rank
  auto model = BpeModel::create(vocab, merges, BpeConfig{});
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (int iter = 0; iter < 400; ++iter) {
    size_t len = 1 + rng.below(iter < 300 ? 20 : 300);  // past 64 symbols the heap path runs
    std::string word;
    for (size_t i = 0; i < len; ++i) word += alphabet[rng.below(alphabet.size())];
    std::vector<int32_t> expected;
    for (const auto& piece : reference_bpe(chars_of(word), merges)) {
      expected.push_back(*vocab.find(piece));
    }
    for (int pass = 0; pass < 2; ++pass) {  // second pass hits the word cache
      std::vector<int32_t> ids;
      (*model)->encode(word, &ids);
      ASSERT_EQ(ids, expected) << "word '" << word << "' pass " << pass;
    }
  }
}

TEST(BpeModelTest, ByteLevelWordsAreRawBytes) {
  Vocab vocab;
  for (int b = 0; b < 256; ++b) vocab.set(b, utf8_encode(byte_to_char(static_cast<uint8_t>(b))));
  Merges merges = {{"Ġ", "w"}, {"o", "r"}, {"Ġw", "or"}, {"l", "d"}, {"Ġwor", "ld"}};
  for (const auto& [a, b] : merges) vocab.set(vocab.size(), a + b);
  BpeConfig config;
  config.byte_level = true;
  auto model = BpeModel::create(vocab, merges, config);
  ASSERT_TRUE(model.ok());
  std::vector<int32_t> ids;
  (*model)->encode(" world", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{*vocab.find("Ġworld")}));
  ids.clear();
  (*model)->encode("\xE4\xB8\x96", &ids);  // 世: three byte symbols
  EXPECT_EQ(ids, (std::vector<int32_t>{*vocab.find("ä"), *vocab.find("¸"), *vocab.find("ĸ")}));
}

TEST(BpeModelTest, IgnoreMergesByteFallbackAndUnk) {
  Vocab vocab;
  for (std::string p : {"<unk>", "a", "b", "c", "ab", "abc", "<0x7A>"}) vocab.set(vocab.size(), p);
  Merges merges = {{"a", "b"}};
  // "abc" is a token but no merge builds it: only ignore_merges emits it whole.
  auto plain = BpeModel::create(vocab, merges, BpeConfig{.unk_token = "<unk>"});
  auto whole = BpeModel::create(vocab, merges, BpeConfig{.ignore_merges = true});
  ASSERT_TRUE(plain.ok() && whole.ok());
  std::vector<int32_t> ids;
  (*plain)->encode("abc", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{4, 3}));
  ids.clear();
  (*whole)->encode("abc", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{5}));
  // Unknown characters: unk per character, fused with fuse_unk, bytes with byte_fallback.
  ids.clear();
  (*plain)->encode("xya", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 0, 1}));
  auto fused = BpeModel::create(vocab, merges, BpeConfig{.fuse_unk = true, .unk_token = "<unk>"});
  ids.clear();
  (*fused)->encode("xya", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 1}));
  auto fallback =
      BpeModel::create(vocab, merges, BpeConfig{.byte_fallback = true, .unk_token = "<unk>"});
  ids.clear();
  (*fallback)->encode("zx", &ids);  // <0x7A> exists, <0x78> does not
  EXPECT_EQ(ids, (std::vector<int32_t>{6, 0}));
  // No unk token: unknown characters are dropped.
  ids.clear();
  (*whole)->encode("xa", &ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{1}));
}

TEST(BpeModelTest, CreateRejectsBadVocabularies) {
  Vocab vocab;
  vocab.set(0, "a");
  vocab.set(1, "b");
  auto bad_merge = BpeModel::create(vocab, {{"a", "q"}}, BpeConfig{});
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.status().message().find("'q'"), std::string::npos);
  auto missing_result = BpeModel::create(vocab, {{"a", "b"}}, BpeConfig{});
  ASSERT_FALSE(missing_result.ok());
  EXPECT_NE(missing_result.status().message().find("'ab'"), std::string::npos);
  auto bad_unk = BpeModel::create(vocab, {}, BpeConfig{.unk_token = "<unk>"});
  EXPECT_FALSE(bad_unk.ok());
}

// SentencePiece BPE, textbook: merge the best-scoring adjacent pair (leftmost on ties) whose
// concatenation is a piece, until none is.
std::vector<std::string> reference_spm_bpe(std::vector<std::string> syms,
                                           const std::map<std::string, float>& score) {
  for (;;) {
    int best = -1;
    float best_score = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = score.find(syms[i] + syms[i + 1]);
      if (it != score.end() && (best < 0 || it->second > best_score)) {
        best = static_cast<int>(i);
        best_score = it->second;
      }
    }
    if (best < 0) return syms;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
}

TEST(SpmBpeModelTest, MatchesTextbookMergingOnRandomText) {
  Rng rng(11);
  const std::string sp = "\xE2\x96\x81";
  std::vector<std::string> alphabet = {sp, "a", "b", "c", "é"};
  std::vector<SpPiece> pieces = {{"<unk>", 0, SpPiece::Type::kUnknown}};
  std::map<std::string, float> score;
  std::vector<std::string> tokens = alphabet;
  for (const auto& t : alphabet) {
    pieces.push_back({t, -100.0f, SpPiece::Type::kNormal});
    score[t] = -100.0f;
  }
  while (pieces.size() < 120) {
    std::string p = tokens[rng.below(tokens.size())] + tokens[rng.below(tokens.size())];
    // SentencePiece-trained pieces never have "▁" after another character.
    bool ok = p.size() <= 14 && !score.count(p);
    for (size_t q = p.find(sp, 1); ok && q != std::string::npos; q = p.find(sp, q + 1)) {
      ok = q >= 3 && p.compare(q - 3, 3, sp) == 0;
    }
    if (!ok) continue;
    float s = -static_cast<float>(rng.below(50));  // ties are common: leftmost must win
    pieces.push_back({p, s, SpPiece::Type::kNormal});
    score[p] = s;
    tokens.push_back(p);
  }
  auto model = SpmBpeModel::create(pieces, 0, false);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<std::string> syms;
    std::string text;
    size_t len = 1 + rng.below(iter < 200 ? 16 : 120);
    for (size_t i = 0; i < len; ++i) {
      syms.push_back(alphabet[rng.below(alphabet.size())]);
      text += syms.back();
    }
    std::vector<int32_t> expected;
    for (const auto& p : reference_spm_bpe(syms, score)) {
      auto it = std::find_if(pieces.begin(), pieces.end(),
                             [&](const SpPiece& x) { return x.piece == p; });
      expected.push_back(static_cast<int32_t>(it - pieces.begin()));
    }
    std::vector<int32_t> ids;
    (*model)->encode(text, &ids);
    ASSERT_EQ(ids, expected) << text;
  }
}

TEST(SpmBpeModelTest, UnusedPiecesAreSplitBackAndUnknownsFallBack) {
  std::vector<SpPiece> pieces = {
      {"<unk>", 0, SpPiece::Type::kUnknown}, {"a", -1, SpPiece::Type::kNormal},
      {"b", -1, SpPiece::Type::kNormal},     {"c", -1, SpPiece::Type::kNormal},
      {"ab", -2, SpPiece::Type::kUnused},    {"abc", -3, SpPiece::Type::kNormal}};
  auto model = SpmBpeModel::create(pieces, 0, false);
  ASSERT_TRUE(model.ok());
  std::vector<int32_t> ids;
  (*model)->encode("abc", &ids);  // merges through the unused "ab"
  EXPECT_EQ(ids, (std::vector<int32_t>{5}));
  ids.clear();
  (*model)->encode("ab", &ids);  // "ab" alone is unused: back to its parts
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2}));
  ids.clear();
  (*model)->encode("xyb", &ids);  // consecutive unknowns make one <unk>
  EXPECT_EQ(ids, (std::vector<int32_t>{0, 2}));
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    pieces.push_back({name, 0, SpPiece::Type::kByte});
  }
  auto fallback = SpmBpeModel::create(pieces, 0, true);
  ASSERT_TRUE(fallback.ok());
  ids.clear();
  (*fallback)->encode("x\xC3\xA9", &ids);  // 'x' and 'é' as bytes
  EXPECT_EQ(ids, (std::vector<int32_t>{6 + 'x', 6 + 0xC3, 6 + 0xA9}));
}

// Unigram, textbook: the best-scoring segmentation over all of them (exhaustive search).
float best_segmentation(const std::string& s, size_t pos, const std::map<std::string, float>& score,
                        float unk_score, std::map<size_t, float>* memo) {
  if (pos == s.size()) return 0;
  if (auto it = memo->find(pos); it != memo->end()) return it->second;
  float best = -std::numeric_limits<float>::infinity();
  bool single = false;
  size_t n1 = utf8_len(static_cast<uint8_t>(s[pos]));
  for (size_t end = pos + 1; end <= s.size(); ++end) {
    auto it = score.find(s.substr(pos, end - pos));
    if (it == score.end()) continue;
    if (end - pos == n1) single = true;
    best = std::max(best, it->second + best_segmentation(s, end, score, unk_score, memo));
  }
  if (!single)
    best = std::max(best, unk_score + best_segmentation(s, pos + n1, score, unk_score, memo));
  (*memo)[pos] = best;
  return best;
}

TEST(UnigramModelTest, ViterbiFindsTheBestSegmentation) {
  Rng rng(5);
  std::vector<std::string> alphabet = {"a", "b", "c", "d", "ü"};
  std::vector<SpPiece> pieces = {{"<unk>", 0, SpPiece::Type::kUnknown}};
  std::map<std::string, float> score;
  while (pieces.size() < 60) {
    std::string p;
    size_t len = 1 + rng.below(4);
    for (size_t i = 0; i < len; ++i) p += alphabet[rng.below(alphabet.size() - 1)];  // no ü
    if (score.count(p)) continue;
    float s = -1.0f - static_cast<float>(rng.uniform()) * 10.0f;
    pieces.push_back({p, s, SpPiece::Type::kNormal});
    score[p] = s;
  }
  float min_score = 0;
  for (const auto& [p, s] : score) min_score = std::min(min_score, s);
  auto model = UnigramModel::create(pieces, 0, false);
  ASSERT_TRUE(model.ok());
  for (int iter = 0; iter < 200; ++iter) {
    std::string text;
    size_t len = 1 + rng.below(12);
    for (size_t i = 0; i < len; ++i) text += alphabet[rng.below(alphabet.size())];
    std::vector<int32_t> ids;
    (*model)->encode(text, &ids);
    // Recompute the score of the returned segmentation; it must be the optimum. No piece has
    // "ü", so each one is an unknown character (runs of them come out as one <unk> id).
    float total = 0;
    std::string rebuilt;
    for (int32_t id : ids) {
      if (id != 0) {
        total += pieces[id].score;
        rebuilt += pieces[id].piece;
      }
    }
    size_t unknown = 0;
    for (size_t p = text.find("ü"); p != std::string::npos; p = text.find("ü", p + 1)) ++unknown;
    total += static_cast<float>(unknown) * (min_score - 10.0f);
    std::string without_u;
    for (const auto& ch : chars_of(text)) {
      if (ch != "ü") without_u += ch;
    }
    EXPECT_EQ(rebuilt, without_u);
    std::map<size_t, float> memo;
    EXPECT_NEAR(total, best_segmentation(text, 0, score, min_score - 10.0f, &memo), 1e-3) << text;
  }
}

}  // namespace
}  // namespace strata::tok
