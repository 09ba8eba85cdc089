// GrammarMatcher: the token masks against a plain reference (each token's bytes run through a
// copy of the matcher), on made-up and real vocabularies, and accept/complete/terminate rules.
#include <gtest/gtest.h>

#include <random>

#include "grammar/grammar.h"
#include "grammar/vocabulary.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace strata::grammar {
namespace {

std::shared_ptr<const Grammar> parse(const std::string& text) {
  auto g = Grammar::parse_ebnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

std::shared_ptr<const TokenVocabulary> vocab_of(std::vector<std::string> tokens, int32_t eos) {
  auto v = std::make_shared<TokenVocabulary>();
  v->token_bytes = std::move(tokens);
  v->is_special.assign(v->token_bytes.size(), 0);
  if (eos >= 0) {
    v->is_special[eos] = 1;
    v->token_bytes[eos].clear();
    v->eos_token_ids = {eos};
  }
  v->vocab_size = static_cast<int64_t>(v->token_bytes.size()) + 3;  // padded logits row
  return v;
}

bool bit(const std::vector<uint64_t>& m, int32_t id) {
  return (m[id >> 6] >> (id & 63)) & 1;
}

// The reference mask: a token is allowed when a fresh matcher fed the same history accepts it.
std::vector<uint64_t> reference_mask(const std::shared_ptr<const CompiledGrammar>& g,
                                     const std::vector<int32_t>& history) {
  const TokenVocabulary& v = g->vocabulary();
  std::vector<uint64_t> mask(GrammarMatcher::mask_words(v.vocab_size), 0);
  for (int32_t id = 0; id < v.vocab_size; ++id) {
    GrammarMatcher m(g);
    for (int32_t h : history) EXPECT_TRUE(m.accept_token(h));
    if (m.accept_token(id)) mask[id >> 6] |= uint64_t{1} << (id & 63);
  }
  return mask;
}

// Walks the grammar with random allowed tokens, checking each mask against the reference.
void random_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int max_steps,
                  uint32_t seed, bool check_every_step = true) {
  std::mt19937 rng(seed);
  const TokenVocabulary& v = g->vocabulary();
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(g);
    std::vector<int32_t> history;
    for (int step = 0; step < max_steps && !m.is_terminated(); ++step) {
      std::vector<uint64_t> mask(GrammarMatcher::mask_words(v.vocab_size), 0);
      m.fill_next_token_mask(mask);
      if (check_every_step || step % 8 == 0) {
        auto ref = reference_mask(g, history);
        bool any = false;
        for (uint64_t word : ref) any = any || word != 0;
        if (!any) {  // nothing spells the next piece: the matcher offers EOS to end
          for (int32_t e : v.eos_token_ids) EXPECT_TRUE(bit(mask, e));
        } else {
          ASSERT_EQ(mask, ref) << "walk " << w << " step " << step;
        }
      }
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v.vocab_size; ++id) {
        if (bit(mask, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick)) << "a masked-in token was refused";
      history.push_back(pick);
    }
  }
}

constexpr const char* kJsonish = R"(
  root   ::= object
  value  ::= object | array | string | number | "true" | "false" | "null"
  object ::= "{" ws ( string ws ":" ws value ws ( "," ws string ws ":" ws value ws )* )? "}"
  array  ::= "[" ws ( value ws ( "," ws value ws )* )? "]"
  string ::= "\"" ( [^"\\] | "\\" ["\\/bfnrt] )* "\""
  number ::= "-"? [0-9]+ ( "." [0-9]+ )?
  ws     ::= [ \n]?
)";

TEST(Matcher, MasksMatchTheReferenceOnASmallVocabulary) {
  // Tokens that straddle rule boundaries ("\",", "}]", "[{\"") exercise the uncertain path.
  auto v = vocab_of({"{",    "}",    "[",    "]",        "\"",  ",",    ":",    " ",    "\n",
                     "a",    "b",    "ab",   "\\",       "\\n", "\",",  "\":",  "}]",   "[{\"",
                     "{\"",  "\"}",  "1",    "12",       "-",   ".",    "true", "tr",   "ue",
                     "null", "\xC3", "\xA9", "\xC3\xA9", "é\"", ", \"", "]}",   "\"\"", "<eos>"},
                    35);
  auto g = CompiledGrammar::compile(parse(kJsonish), v);
  random_walks(g, 30, 40, 7);
}

// With a token budget, random walks end complete whenever the budget allows: near the end only
// tokens on a shortest completion are offered.
TEST(Matcher, TokenBudgetEndsWithAWholeSentence) {
  auto v = vocab_of({"{",  "}",   "[",   "]",   "\"", ",",  ":",    " ",    "a",  "b",
                     "ab", "abc", "\",", "\":", "1",  "12", "true", "null", "\n", "<eos>"},
                    19);
  auto g = CompiledGrammar::compile(parse(kJsonish), v);
  std::mt19937 rng(3);
  for (int walk = 0; walk < 200; ++walk) {
    const int budget = 2 + static_cast<int>(rng() % 40);  // "{}" needs 2 tokens
    GrammarMatcher m(g);
    int used = 0;
    for (; used < budget && !m.is_terminated(); ++used) {
      std::vector<uint64_t> mask(GrammarMatcher::mask_words(v->vocab_size), 0);
      m.fill_next_token_mask(mask, budget - used);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < v->vocab_size; ++id) {
        if (bit(mask, id)) allowed.push_back(id);
      }
      ASSERT_FALSE(allowed.empty());
      int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
      if (pick == 19) break;
    }
    EXPECT_TRUE(m.is_complete()) << "walk " << walk << " budget " << budget;
  }
}

TEST(Matcher, CompleteTerminatedAndEos) {
  auto v = vocab_of({"a", "b", "ab", "<eos>"}, 3);
  auto g = CompiledGrammar::compile(parse(R"(root ::= "a" "b"?)"), v);
  GrammarMatcher m(g);
  EXPECT_FALSE(m.is_complete());
  EXPECT_FALSE(m.accept_token(3));  // EOS before the grammar is complete
  EXPECT_FALSE(m.accept_token(1));  // "b" cannot start
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_complete());
  EXPECT_FALSE(m.is_terminated());  // "b" may still follow
  std::vector<uint64_t> mask(1);
  m.fill_next_token_mask(mask);
  EXPECT_EQ(mask[0], (uint64_t{1} << 1) | (uint64_t{1} << 3));  // "b" or EOS
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.is_terminated());
  m.fill_next_token_mask(mask);
  EXPECT_EQ(mask[0], uint64_t{1} << 3);  // only EOS
  EXPECT_TRUE(m.accept_token(3));
  EXPECT_FALSE(m.accept_token(0));
  EXPECT_TRUE(m.accept_token(3));  // ignore_eos: EOS again
}

TEST(Matcher, SpecialAndEmptyTokensAreNeverAllowed) {
  auto v = vocab_of({"a", "", "<|im_end|>", "<eos>"}, 3);
  std::const_pointer_cast<TokenVocabulary>(v)->is_special[2] = 1;
  auto g = CompiledGrammar::compile(parse(R"(root ::= "a"* "<|im_end|>"?)"), v);
  GrammarMatcher m(g);
  std::vector<uint64_t> mask(1);
  m.fill_next_token_mask(mask);
  EXPECT_EQ(mask[0], (uint64_t{1} << 0) | (uint64_t{1} << 3));
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(2));
}

TEST(Matcher, RefusedTokenLeavesTheStateUnchanged) {
  auto v = vocab_of({"[", "]", "1", "]]", "<eos>"}, 4);
  auto g = CompiledGrammar::compile(parse(R"(root ::= v
                                             v ::= "[" v? "]" | "1")"),
                                    v);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_FALSE(m.accept_token(3));  // "]]" closes one more than was opened
  ASSERT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.is_terminated());
}

// The real vocabularies: byte-level BPE (Qwen2.5, 151k tokens) and SentencePiece with byte
// fallback (stories260K's Llama-2-style tokenizer). Masks checked against the reference at
// sampled steps (the reference costs one matcher run per token).
std::shared_ptr<const TokenVocabulary> real_vocab(const std::string& rel) {
  auto tok = Tokenizer::load(testing::shared_data_path(rel));
  EXPECT_TRUE(tok.ok()) << tok.status().message();
  std::vector<int32_t> eos;
  if ((*tok)->eos_token_id()) eos.push_back(*(*tok)->eos_token_id());
  return make_token_vocabulary(**tok, (*tok)->vocab_size(), eos);
}

TEST(MatcherGolden, SentencePieceVocabulary) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  auto v = real_vocab("models/stories260K-hf");
  // Byte-fallback tokens and "▁" as a space: the bytes are what the decoder produces.
  auto g = CompiledGrammar::compile(parse(kJsonish), v);
  random_walks(g, 6, 60, 11);
}

TEST(MatcherGolden, ByteLevelVocabulary) {
  STRATA_REQUIRE_SHARED("tokenizers/qwen2.5/vocab.json");
  auto v = real_vocab("tokenizers/qwen2.5");
  ASSERT_GT(v->token_bytes.size(), 150000u);
  auto g = CompiledGrammar::compile(parse(kJsonish), v);
  random_walks(g, 2, 24, 5, /*check_every_step=*/false);
}

TEST(MatcherGolden, TokenBytesMatchDecoding) {
  STRATA_REQUIRE_SHARED("models/stories260K-hf/tokenizer.json");
  auto tok = Tokenizer::load(testing::shared_data_path("models/stories260K-hf"));
  ASSERT_TRUE(tok.ok());
  auto ids = (*tok)->encode("Once upon a time, {\"x\": 1} é", false);
  ASSERT_TRUE(ids.ok());
  std::string bytes;
  for (int32_t id : *ids) bytes += (*tok)->token_bytes(id);
  // The first token's leading space is what decoding strips at the very start of a text.
  std::string decoded = (*tok)->decode(*ids);
  EXPECT_TRUE(bytes == decoded || bytes == " " + decoded) << bytes << " vs " << decoded;
}

}  // namespace
}  // namespace strata::grammar
