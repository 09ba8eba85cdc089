// `strata bench grammar TOKENIZER`: the cost of structured outputs without a model: compiling a
// JSON Schema (schema -> EBNF -> automata -> tables over the vocabulary) and computing one
// next-token mask, over random walks that pick uniformly among the allowed tokens (what
// temperature-1 sampling on a model that knows nothing of the schema does).
#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "apps/command.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "core/json.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/vocabulary.h"
#include "tokenizer/tokenizer.h"

namespace strata::apps {
namespace {

// A typical tool's parameters (the shape of OpenAI's function-calling examples).
constexpr const char* kToolSchema = R"({
  "type": "object",
  "properties": {
    "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "include_hourly": {"type": "boolean"},
    "stations": {"type": "array", "maxItems": 4,
                 "items": {"type": "object",
                           "properties": {"id": {"type": "string", "maxLength": 16},
                                          "weight": {"type": "number"}},
                           "required": ["id"]}}
  },
  "required": ["location", "unit"],
  "additionalProperties": false
})";

void add_options(OptionSet& o) {
  o.add_string("schema", "", "JSON Schema file (default: a typical tool's parameters)");
  o.add_int("walks", 20, "random walks through the grammar");
  o.add_int("max-steps", 256, "token budget of each walk");
  o.add_int("compiles", 20, "times the schema is compiled (median reported)");
  o.add_int("seed", 0, "seed of the walks");
  o.add_bool("print-ebnf", false, "print the grammar the schema compiles to");
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

int run(const Args& args) {
  if (args.positional().size() != 1) {
    std::fprintf(stderr, "usage: strata bench grammar TOKENIZER_OR_MODEL_DIR [--schema FILE]\n");
    return 2;
  }
  auto tok = Tokenizer::load(args.positional()[0]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  std::string schema_text = kToolSchema;
  if (!args.get("schema").empty()) {
    auto data = read_file(args.get("schema"));
    if (!data.ok()) {
      std::fprintf(stderr, "%s\n", data.status().to_string().c_str());
      return 1;
    }
    schema_text = *data;
  }
  auto schema = parse_ordered_json(schema_text, "schema");
  if (!schema.ok()) {
    std::fprintf(stderr, "%s\n", schema.status().to_string().c_str());
    return 1;
  }
  std::vector<int32_t> eos;
  if ((*tok)->eos_token_id()) eos.push_back(*(*tok)->eos_token_id());
  Stopwatch vsw;
  auto vocab = grammar::make_token_vocabulary(**tok, (*tok)->vocab_size(), eos);
  const double vocab_s = vsw.elapsed();
  {  // the vocabulary's sorted index is built once per vocabulary: not part of a compile
    auto g = grammar::Grammar::parse_ebnf("root ::= \"x\"");
    auto warm = grammar::CompiledGrammar::compile(*g, vocab);
  }
  std::vector<double> to_ebnf, parse, bind;
  std::shared_ptr<const grammar::CompiledGrammar> compiled;
  for (int i = 0; i < std::max<int64_t>(1, args.get_int("compiles")); ++i) {
    Stopwatch sw;
    auto ebnf = grammar::json_schema_to_ebnf(*schema);
    if (!ebnf.ok()) {
      std::fprintf(stderr, "schema: %s\n", ebnf.status().message().c_str());
      return 1;
    }
    to_ebnf.push_back(sw.elapsed());
    Stopwatch sw2;
    auto g = grammar::Grammar::parse_ebnf(*ebnf);
    if (!g.ok()) {
      std::fprintf(stderr, "grammar: %s\n", g.status().message().c_str());
      return 1;
    }
    parse.push_back(sw2.elapsed());
    Stopwatch sw3;
    compiled = grammar::CompiledGrammar::compile(*g, vocab);
    bind.push_back(sw3.elapsed());
  }
  const auto& a = compiled->grammar().automaton();
  if (args.get_bool("print-ebnf")) std::printf("%s\n", compiled->grammar().to_ebnf().c_str());
  std::printf("tokenizer %s: %zu tokens (token bytes in %.1f ms)\n", args.positional()[0].c_str(),
              vocab->token_bytes.size(), vocab_s * 1e3);
  std::string names;
  for (const auto& r : a.rules) names += (names.empty() ? "" : ", ") + r.name;
  std::printf("automaton: %zu called rules (%s), %d states, %d byte classes\n", a.rules.size(),
              names.c_str(), a.total_states(), a.num_classes);
  const double compile_ms = (median(to_ebnf) + median(parse) + median(bind)) * 1e3;
  std::printf(
      "compile (median of %zu): schema->EBNF %.3f ms, EBNF->automata %.3f ms, bind to "
      "vocabulary %.3f ms; total %.3f ms\n",
      to_ebnf.size(), median(to_ebnf) * 1e3, median(parse) * 1e3, median(bind) * 1e3, compile_ms);

  std::mt19937 rng(static_cast<uint32_t>(args.get_int("seed")));
  std::vector<uint64_t> mask(grammar::GrammarMatcher::mask_words(vocab->vocab_size));
  std::vector<double> first_walk, later, all;
  int64_t tokens = 0, finished = 0;
  const int walks = static_cast<int>(args.get_int("walks"));
  const int64_t budget = args.get_int("max-steps");
  for (int w = 0; w < walks; ++w) {
    grammar::GrammarMatcher m(compiled);
    for (int64_t step = 0; step < budget && !m.is_terminated(); ++step) {
      Stopwatch sw;
      m.fill_next_token_mask(mask, budget - step);
      const double t = sw.elapsed();
      (w == 0 ? first_walk : later).push_back(t);
      all.push_back(t);
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < mask.size(); ++i) {
        for (uint64_t bits = mask[i]; bits; bits &= bits - 1) {
          allowed.push_back(static_cast<int32_t>(i * 64 + __builtin_ctzll(bits)));
        }
      }
      if (allowed.empty()) break;
      int32_t pick = allowed[rng() % allowed.size()];
      m.accept_token(pick);
      ++tokens;
    }
    finished += m.is_complete() ? 1 : 0;
  }
  std::printf("masks: %lld over %d walks (%lld of them complete JSON)\n",
              static_cast<long long>(all.size()), walks, static_cast<long long>(finished));
  std::printf(
      "mask time: median %.1f us, p90 %.1f us, max %.1f us (first walk, filling the "
      "per-state tables: median %.1f us, max %.1f us; later walks median %.1f us)\n",
      median(all) * 1e6, percentile(all, 0.9) * 1e6,
      *std::max_element(all.begin(), all.end()) * 1e6, median(first_walk) * 1e6,
      *std::max_element(first_walk.begin(), first_walk.end()) * 1e6, median(later) * 1e6);
  return 0;
}

STRATA_REGISTER_COMMAND(kBenchGrammar, "bench grammar", "TOKENIZER [options]",
                        "structured outputs: schema compile time and next-token mask time",
                        add_options, run);

}  // namespace
}  // namespace strata::apps
