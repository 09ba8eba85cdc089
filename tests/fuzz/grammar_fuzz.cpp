// The grammar compiler and matcher (grammar/): the first byte picks what the rest is (EBNF text,
// a JSON Schema, a regular expression); the constraint is compiled against a small fixed
// vocabulary and walked for a few tokens. Promises checked: no crash, no exception; an invalid
// constraint is InvalidArgument with a message; every token the mask offers is accepted; the
// matcher never offers nothing before it is complete (EOS comes with completion or as the way
// out when the vocabulary cannot spell what comes next).
#include <nlohmann/json.hpp>
#include <string>

#include "core/json.h"
#include "fuzz_targets.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace strata::fuzz {
namespace {

// Every single byte, some multi-byte pieces that cross JSON and rule boundaries, and EOS.
std::shared_ptr<const grammar::TokenVocabulary> vocabulary() {
  static const auto v = [] {
    auto t = std::make_shared<grammar::TokenVocabulary>();
    for (int b = 0; b < 256; ++b) t->token_bytes.emplace_back(1, static_cast<char>(b));
    for (const char* s : {"\",", "\":", "{\"", "\"}", "}]", "[{", "true", "null", "ab", "\\n",
                          "\xC3\xA9", "  ", "\n  ", "12", "-0."}) {
      t->token_bytes.emplace_back(s);
    }
    t->token_bytes.emplace_back();  // EOS
    t->is_special.assign(t->token_bytes.size(), 0);
    t->is_special.back() = 1;
    t->eos_token_ids = {static_cast<int32_t>(t->token_bytes.size() - 1)};
    t->vocab_size = static_cast<int64_t>(t->token_bytes.size());
    return t;
  }();
  return v;
}

}  // namespace

int grammar(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  Result<std::string> ebnf = text;
  switch (data[0] % 3) {
    case 0:
      break;
    case 1: {
      auto schema = parse_ordered_json(text, "schema");
      if (!schema.ok()) return 0;
      ebnf = grammar::json_schema_to_ebnf(*schema);
      break;
    }
    default:
      ebnf = grammar::regex_to_ebnf(text);
      break;
  }
  if (!ebnf.ok()) {
    STRATA_FUZZ_CHECK(ebnf.status().code() == StatusCode::kInvalidArgument &&
                      !ebnf.status().message().empty())
        << ebnf.status().to_string();
    return 0;
  }
  auto g = grammar::Grammar::parse_ebnf(*ebnf);
  if (!g.ok()) {
    STRATA_FUZZ_CHECK(g.status().code() == StatusCode::kInvalidArgument &&
                      !g.status().message().empty())
        << g.status().to_string();
    // A grammar the converters generated must parse (unless it is too large to compile).
    STRATA_FUZZ_CHECK(data[0] % 3 == 0 ||
                      g.status().message().find("too large") != std::string::npos)
        << "generated grammar refused: " << g.status().message() << "\n"
        << *ebnf;
    return 0;
  }
  auto v = vocabulary();
  auto compiled = grammar::CompiledGrammar::compile(*g, v);
  grammar::GrammarMatcher m(compiled);
  std::vector<uint64_t> mask(grammar::GrammarMatcher::mask_words(v->vocab_size));
  uint64_t pick = size;
  for (int step = 0; step < 64 && !m.is_terminated(); ++step) {
    m.fill_next_token_mask(mask, 64 - step);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < v->vocab_size; ++id) {
      if ((mask[id >> 6] >> (id & 63)) & 1) allowed.push_back(id);
    }
    STRATA_FUZZ_CHECK(!allowed.empty()) << "an empty mask";
    pick = pick * 6364136223846793005ull + 1442695040888963407ull;
    const int32_t id = allowed[(pick >> 33) % allowed.size()];
    STRATA_FUZZ_CHECK(m.accept_token(id)) << "a masked-in token was refused: " << id;
    if (id == v->eos_token_ids[0]) break;
  }
  return 0;
}

}  // namespace strata::fuzz
