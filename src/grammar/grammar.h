// Constrained decoding: grammars over bytes, compiled against a model's vocabulary, and the
// per-sequence matcher that yields the set of tokens allowed next.
//
//   Grammar          a checked context-free grammar (EBNF text, see parse_ebnf); vocabulary-free
//   TokenVocabulary  the bytes each token id adds to the output, built once per tokenizer
//   CompiledGrammar  Grammar + vocabulary + the precomputed per-state token sets; shared, cached
//                    per constraint, thread-safe
//   GrammarMatcher   one per generated sequence: next-token bitmask, accept a token, complete?
//
// The EBNF dialect is GBNF's (llama.cpp), which vLLM's and SGLang's EBNF users also write:
//   name ::= alternative | alternative ...        # the start rule is `root` (or the one named)
//   "literal" 'literal'   escapes \n \r \t \\ \" \' \xHH \uHHHH \UHHHHHHHH
//   [a-z0-9_] [^"\\]      character classes over Unicode code points (ranges, negation, escapes)
//   .                     any code point
//   ( ... )               grouping;   x* x+ x?  x{m} x{m,} x{m,n}  repetition
//   # comment             to the end of the line; rules may span lines
// Terminals are Unicode code points matched as UTF-8 bytes, so a token that ends inside a
// multi-byte character is allowed when the character can still be completed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::grammar {

struct GrammarIr;  // grammar/grammar_ir.h
struct Automaton;  // grammar/automaton.h

class Grammar {
 public:
  // Parses EBNF text (dialect above) with `root_rule` as the start rule. Errors name the line,
  // the column and what was expected; undefined rules, a missing root and rules that can recurse
  // without consuming input (left recursion) are errors.
  static Result<std::shared_ptr<const Grammar>> parse_ebnf(std::string_view text,
                                                           std::string_view root_rule = "root");
  ~Grammar();
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;

  // True when the whole of `bytes` is a sentence of the grammar.
  bool accepts(std::string_view bytes) const;
  // True when `bytes` can be extended into a sentence (a live prefix).
  bool accepts_prefix(std::string_view bytes) const;
  // The grammar back as EBNF text (normalised; for messages and tests).
  std::string to_ebnf() const;

  const Automaton& automaton() const { return *automaton_; }

 private:
  Grammar(std::unique_ptr<GrammarIr> ir, std::unique_ptr<Automaton> automaton);
  std::unique_ptr<GrammarIr> ir_;
  std::unique_ptr<Automaton> automaton_;
};

// What the matcher needs of a tokenizer, built once (e.g. from strata::Tokenizer).
struct TokenVocabulary {
  // [num_tokens] the raw bytes each id adds to the decoded output when it follows other text
  // (byte-level BPE bytes, SentencePiece's U+2581 as a space, <0xNN> as the byte). Special tokens
  // and ids with no text hold "".
  std::vector<std::string> token_bytes;
  std::vector<uint8_t> is_special;     // [num_tokens] never allowed inside a constraint
  std::vector<int32_t> eos_token_ids;  // allowed once the grammar is complete (and only then)
  int64_t vocab_size = 0;  // the logits row; ids >= token_bytes.size() are never allowed
};

class CompiledGrammar;

// One sequence's position in a compiled grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Words of a vocab_size-bit mask: bit (id % 64) of word (id / 64) set = id allowed next.
  static size_t mask_words(int64_t vocab_size) {
    return static_cast<size_t>((vocab_size + 63) / 64);
  }
  static constexpr int64_t kUnlimited = INT64_MAX;
  // Fills `mask` (mask_words(vocab_size) words) with the tokens allowed next. EOS ids are set
  // when the grammar is complete here; when nothing else can follow, only they are.
  // `remaining_tokens` (the sequence's budget: max_tokens or the model length): when it comes
  // close to the bytes still needed to finish, only tokens on a shortest completion are
  // allowed, so a sequence cut by its budget still ends as a whole sentence when it can.
  void fill_next_token_mask(std::span<uint64_t> mask, int64_t remaining_tokens = kUnlimited);
  // Advances by one token. False (and no change) when the token is not allowed here; EOS is
  // accepted only when complete and then terminates the matcher (which accepts EOS only).
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, forced prefixes). False (no change) when they cannot continue.
  bool accept_bytes(std::string_view bytes);
  bool is_complete() const;    // the output so far is a whole sentence (EOS allowed)
  bool is_terminated() const;  // EOS accepted, or complete with no possible continuation

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// A grammar compiled against one vocabulary. Build once per constraint and share: matchers
// created from it read its per-state token tables, filled lazily under a lock.
class CompiledGrammar {
 public:
  static std::shared_ptr<const CompiledGrammar> compile(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocabulary> vocabulary);
  ~CompiledGrammar();
  const Grammar& grammar() const;
  const TokenVocabulary& vocabulary() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  CompiledGrammar() = default;
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::grammar
