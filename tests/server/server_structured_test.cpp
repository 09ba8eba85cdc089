// Structured outputs over the OpenAI API on stories260K (a model that never writes JSON by
// itself, so the constraint does all the work): response_format json_schema and json_object,
// vLLM's structured_outputs (json, regex, choice, grammar) and the older guided_* fields, each
// checked against the constraint's own grammar and, for JSON, a JSON parser; errors are 400s
// naming the field.
#include <gtest/gtest.h>

#include "core/json.h"
#include "grammar/grammar.h"
#include "server/structured_output.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

class ServerStructured : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine::EngineConfig e;
    e.model.model = strata::testing::shared_data_path("models/stories260K-hf");
    e.cache.kv_cache_memory_bytes = 16 << 20;
    e.threads = 1;
    ServerConfig c = testing::local_server_config();
    c.served_model_names = {"stories"};
    harness_ = new ServerHarness(e, c);
  }
  static void TearDownTestSuite() {
    delete harness_;
    harness_ = nullptr;
  }
  void SetUp() override {
    STRATA_REQUIRE_SHARED("models/stories260K-hf/config.json");
    ASSERT_TRUE(harness_->ok());
  }

  // Posts a completion and returns the texts of its choices (streamed chunks joined).
  std::vector<std::string> complete(Json req, bool stream = false) {
    req["model"] = "stories";
    req["prompt"] = req.value("prompt", "Once upon a time");
    req["stream"] = stream;
    auto r = harness_->post("/v1/completions", req.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<std::string> texts;
    if (r.status != 200) return texts;
    for (const Json& b : testing::response_bodies(r.body, stream)) {
      for (const auto& ch : b["choices"]) {
        size_t i = ch["index"].get<size_t>();
        if (texts.size() <= i) texts.resize(i + 1);
        texts[i] += ch["text"].get<std::string>();
      }
    }
    return texts;
  }

  // The grammar a StructuredOutput compiles to, for checking outputs.
  static std::shared_ptr<const grammar::Grammar> grammar_of(const StructuredOutput& so) {
    auto text = ConstraintCompiler::to_ebnf(so);
    EXPECT_TRUE(text.ok()) << text.status().message();
    auto g = grammar::Grammar::parse_ebnf(*text);
    EXPECT_TRUE(g.ok()) << g.status().message();
    return *g;
  }

  static ServerHarness* harness_;
};
ServerHarness* ServerStructured::harness_ = nullptr;

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "pets": {"type": "array", "items": {"enum": ["cat", "dog", "fish"]}, "maxItems": 3},
    "alive": {"type": "boolean"}
  },
  "required": ["name", "age", "alive"],
  "additionalProperties": false
})";

TEST_F(ServerStructured, ResponseFormatJsonSchemaStreamedAndNot) {
  StructuredOutput so;
  so.kind = StructuredOutput::Kind::kJsonSchema;
  so.text = Json::parse(kPersonSchema).dump();
  auto g = grammar_of(so);
  for (bool stream : {false, true}) {
    Json req;
    req["max_tokens"] = 300;
    req["temperature"] = 1;
    req["seed"] = 3;
    req["n"] = 3;
    req["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "person"}, {"schema", Json::parse(kPersonSchema)}}}};
    for (const auto& text : complete(req, stream)) {
      EXPECT_TRUE(g->accepts(text)) << text;
      auto j = parse_json(text, "output");
      ASSERT_TRUE(j.ok()) << text;
      EXPECT_TRUE(j->contains("name") && j->contains("age") && j->contains("alive")) << text;
      EXPECT_GE((*j)["age"].get<int>(), 0);
      EXPECT_LE((*j)["age"].get<int>(), 120);
    }
  }
}

TEST_F(ServerStructured, JsonObjectRegexChoiceAndGrammar) {
  Json req;
  req["max_tokens"] = 60;
  req["temperature"] = 0;
  req["structured_outputs"] = {{"choice", {"red", "green", "blue"}}};
  auto t = complete(req);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_TRUE(t[0] == "red" || t[0] == "green" || t[0] == "blue") << t[0];

  req["structured_outputs"] = {{"regex", "[0-9]{3}-[0-9]{4}"}};
  t = complete(req);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].size(), 8u) << t[0];
  EXPECT_EQ(t[0][3], '-') << t[0];

  req["structured_outputs"] = {{"grammar", "root ::= \"(\" [a-c]{1,3} \")\" (\" \" root)?"}};
  t = complete(req);
  auto g = grammar::Grammar::parse_ebnf(req["structured_outputs"]["grammar"].get<std::string>());
  ASSERT_TRUE(g.ok());
  ASSERT_EQ(t.size(), 1u);
  // Greedy may keep extending the list until max_tokens; the text is always a live prefix.
  EXPECT_TRUE((*g)->accepts_prefix(t[0])) << t[0];

  Json obj;
  obj["max_tokens"] = 120;
  obj["temperature"] = 0;
  obj["response_format"] = {{"type", "json_object"}};
  obj["prompt"] = "{\"";
  t = complete(obj);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].rfind("{", 0), 0u) << t[0];
}

TEST_F(ServerStructured, GuidedFieldsAreHonoured) {
  Json req;
  req["max_tokens"] = 20;
  req["temperature"] = 1;
  req["guided_choice"] = {"yes", "no"};
  for (int i = 0; i < 3; ++i) {
    auto t = complete(req);
    ASSERT_EQ(t.size(), 1u);
    EXPECT_TRUE(t[0] == "yes" || t[0] == "no") << t[0];
  }
  Json js;
  js["max_tokens"] = 100;
  js["temperature"] = 0;
  js["guided_json"] =
      R"({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})";
  auto t = complete(js);
  ASSERT_EQ(t.size(), 1u);
  auto j = parse_json(t[0], "output");
  ASSERT_TRUE(j.ok()) << t[0];
  EXPECT_TRUE((*j)["n"].is_number_integer()) << t[0];
}

TEST_F(ServerStructured, InvalidConstraintsAre400sNamingTheField) {
  struct Case {
    std::string body, param, text;
  };
  const std::vector<Case> cases = {
      {R"({"model": "stories", "prompt": "x", "response_format": {"type": "json_schema",
           "json_schema": {"name": "a", "schema": {"type": "object", "properties": {"a": {"if": {}}}}}}})",
       "response_format", "'if' at $.properties.a"},
      {R"({"model": "stories", "prompt": "x", "structured_outputs": {"grammar": "root ::= nope"}})",
       "structured_outputs", "rule 'nope' is used but not defined"},
      {R"({"model": "stories", "prompt": "x", "guided_regex": "(unclosed"})", "guided_regex", ""},
  };
  for (const auto& c : cases) {
    auto r = harness_->post("/v1/completions", c.body);
    EXPECT_EQ(r.status, 400) << r.body;
    Json e = testing::parse(r.body)["error"];
    EXPECT_EQ(e["param"], c.param) << r.body;
    EXPECT_NE(e["message"].get<std::string>().find(c.text), std::string::npos) << r.body;
  }
  // The server still answers.
  Json ok;
  ok["max_tokens"] = 4;
  EXPECT_EQ(complete(ok).size(), 1u);
}

}  // namespace
}  // namespace strata::server
