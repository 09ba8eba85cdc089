// ConstraintCompiler: compiled constraints are cached per constraint (same request fields, same
// compiled grammar), distinct constraints are compiled apart, the least recently used one is
// evicted past the capacity, and bad constraints are 400s naming their field.
#include <gtest/gtest.h>

#include "server/structured_output.h"

namespace strata::server {
namespace {

std::shared_ptr<const grammar::TokenVocabulary> small_vocabulary() {
  auto v = std::make_shared<grammar::TokenVocabulary>();
  for (int b = 32; b < 127; ++b) v->token_bytes.emplace_back(1, static_cast<char>(b));
  v->token_bytes.emplace_back();  // EOS
  v->is_special.assign(v->token_bytes.size(), 0);
  v->is_special.back() = 1;
  v->eos_token_ids = {static_cast<int32_t>(v->token_bytes.size() - 1)};
  v->vocab_size = static_cast<int64_t>(v->token_bytes.size());
  return v;
}

StructuredOutput regex(const std::string& r) {
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kRegex;
  so.text = r;
  so.param = "structured_outputs";
  return so;
}

TEST(ConstraintCompiler, CachesPerConstraintAndEvictsTheLeastRecentlyUsed) {
  ConstraintCompiler c(small_vocabulary(), /*capacity=*/2);
  auto a1 = c.compile(regex("[0-9]+"));
  auto a2 = c.compile(regex("[0-9]+"));
  ASSERT_TRUE(a1.ok() && a2.ok());
  EXPECT_EQ(a1.value(), a2.value()) << "the same constraint is compiled once";
  auto b = c.compile(regex("[a-z]+"));
  ASSERT_TRUE(b.ok());
  EXPECT_NE(b.value(), a1.value());
  // The same text under another kind or option is another constraint.
  StructuredOutput as_grammar;
  as_grammar.kind = StructuredOutput::Kind::kGrammar;
  as_grammar.text = "root ::= [0-9]+";
  auto g = c.compile(as_grammar);  // evicts "[0-9]+" (b was used after it)
  ASSERT_TRUE(g.ok());
  EXPECT_NE(g.value(), a1.value());
  EXPECT_EQ(c.compile(regex("[a-z]+")).value(), b.value()) << "still cached";
  EXPECT_NE(c.compile(regex("[0-9]+")).value(), a1.value()) << "evicted, compiled again";
  StructuredOutput none;
  auto n = c.compile(none);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n.value(), nullptr);
}

TEST(ConstraintCompiler, BadConstraintsAre400sNamingTheirField) {
  ConstraintCompiler c(small_vocabulary());
  auto r = c.compile(regex("(unclosed"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().status, 400);
  EXPECT_EQ(r.error().param, "structured_outputs");
  StructuredOutput schema;
  schema.kind = StructuredOutput::Kind::kJsonSchema;
  schema.text = R"({"type": "object", "properties": {"a": {"not": {}}}})";
  schema.param = "response_format";
  auto s = c.compile(schema);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().param, "response_format");
  EXPECT_NE(s.error().message.find("'not' at $.properties.a"), std::string::npos)
      << s.error().message;
}

}  // namespace
}  // namespace strata::server
