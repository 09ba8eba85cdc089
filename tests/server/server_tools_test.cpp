// Tool calls forced by tool_choice "required" and a named function on stories260K, a model that
// cannot choose tools by itself: the JSON-schema constraint built from the tools does the work,
// and the server turns the constrained output into tool_calls, streamed and not. Every call must
// name a tool and carry arguments that parse and satisfy that tool's schema.
#include <gtest/gtest.h>

#include <map>

#include "core/json.h"
#include "server_test_util.h"

namespace strata::server {
namespace {

using testing::ServerHarness;

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 10},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time",
    "parameters": {"type": "object", "properties": {
      "tz": {"enum": ["UTC", "CET", "PST"]}}, "required": ["tz"],
      "additionalProperties": false}}}])";

struct Call {
  std::string id, name, arguments;
};

struct Answer {
  std::string finish_reason;
  Json content;  // null or a string
  std::vector<Call> calls;
};

class ServerTools : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    engine::EngineConfig e;
    e.model.model = strata::testing::shared_data_path("models/stories260K-hf");
    e.cache.kv_cache_memory_bytes = 16 << 20;
    e.threads = 1;
    ServerConfig c = testing::local_server_config();
    c.served_model_names = {"stories"};
    // stories260K ships no chat template.
    c.chat_template = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}";
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

  // The choices of a chat request, assembled from the body or from the stream's deltas.
  std::vector<Answer> chat(Json req, bool stream) {
    req["model"] = "stories";
    req["messages"] = Json::parse(R"([{"role": "user", "content": "Once upon a time"}])");
    req["tools"] = Json::parse(kTools);
    req["stream"] = stream;
    auto r = harness_->post("/v1/chat/completions", req.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    std::vector<Answer> out;
    if (r.status != 200) return out;
    if (!stream) {
      const Json body = testing::parse(r.body);
      for (const auto& ch : body["choices"]) {
        Answer a;
        a.finish_reason = ch["finish_reason"];
        a.content = ch["message"]["content"];
        for (const auto& tc : ch["message"]["tool_calls"]) {
          EXPECT_EQ(tc["type"], "function");
          a.calls.push_back({tc["id"], tc["function"]["name"], tc["function"]["arguments"]});
        }
        out.push_back(std::move(a));
      }
      return out;
    }
    std::map<size_t, Answer> by_index;
    std::map<size_t, std::string> content;
    for (const auto& d : testing::sse_data(r.body)) {
      if (d == "[DONE]") continue;
      const Json chunk = testing::parse(d);
      for (const auto& ch : chunk["choices"]) {
        Answer& a = by_index[ch["index"].get<size_t>()];
        const Json& delta = ch["delta"];
        if (delta.contains("content")) content[ch["index"]] += delta["content"].get<std::string>();
        if (delta.contains("tool_calls")) {
          for (const auto& t : delta["tool_calls"]) {
            const size_t i = t["index"];
            if (t.contains("id")) {
              EXPECT_EQ(i, a.calls.size()) << d;
              EXPECT_EQ(t["type"], "function");
              a.calls.push_back({t["id"], t["function"]["name"], ""});
            }
            EXPECT_LT(i, a.calls.size()) << "arguments before the call's first delta: " << d;
            if (i < a.calls.size() && t["function"].contains("arguments"))
              a.calls[i].arguments += t["function"]["arguments"].get<std::string>();
          }
        }
        if (!ch["finish_reason"].is_null()) a.finish_reason = ch["finish_reason"];
      }
    }
    for (auto& [i, a] : by_index) {
      a.content = content[i].empty() ? Json(nullptr) : Json(content[i]);
      out.push_back(std::move(a));
    }
    return out;
  }

  static ServerHarness* harness_;
};
ServerHarness* ServerTools::harness_ = nullptr;

// The arguments satisfy the tool's schema (the properties these tools use).
void expect_valid_call(const Call& c) {
  EXPECT_FALSE(c.id.empty());
  auto j = parse_json(c.arguments, "arguments");
  ASSERT_TRUE(j.ok()) << c.name << ": " << c.arguments;
  ASSERT_TRUE(j->is_object()) << c.arguments;
  if (c.name == "get_weather") {
    ASSERT_TRUE(j->contains("city") && j->contains("days")) << c.arguments;
    EXPECT_EQ(j->size(), 2u) << c.arguments;
    ASSERT_TRUE((*j)["city"].is_string());
    size_t chars = 0;
    for (unsigned char ch : (*j)["city"].get<std::string>()) chars += (ch & 0xC0) != 0x80;
    EXPECT_LE(chars, 10u) << c.arguments;
    ASSERT_TRUE((*j)["days"].is_number_integer()) << c.arguments;
    EXPECT_GE((*j)["days"].get<int>(), 1);
    EXPECT_LE((*j)["days"].get<int>(), 7);
  } else {
    ASSERT_EQ(c.name, "get_time");
    ASSERT_TRUE(j->contains("tz")) << c.arguments;
    EXPECT_EQ(j->size(), 1u) << c.arguments;
    const std::string tz = (*j)["tz"];
    EXPECT_TRUE(tz == "UTC" || tz == "CET" || tz == "PST") << tz;
  }
}

TEST_F(ServerTools, RequiredToolChoiceGivesValidCalls) {
  for (bool stream : {false, true}) {
    for (bool parallel : {true, false}) {
      Json req;
      req["tool_choice"] = "required";
      req["parallel_tool_calls"] = parallel;
      req["max_tokens"] = 300;
      req["temperature"] = 1;
      req["seed"] = 11;
      req["n"] = 3;
      auto answers = chat(req, stream);
      ASSERT_EQ(answers.size(), 3u);
      for (const auto& a : answers) {
        EXPECT_EQ(a.finish_reason, "tool_calls");
        EXPECT_TRUE(a.content.is_null()) << a.content;
        ASSERT_GE(a.calls.size(), 1u);
        if (!parallel) {
          EXPECT_EQ(a.calls.size(), 1u);
        }
        for (const auto& c : a.calls) expect_valid_call(c);
      }
    }
  }
}

TEST_F(ServerTools, NamedToolChoiceGivesThatCall) {
  for (bool stream : {false, true}) {
    Json req;
    req["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_time"}}}};
    req["max_tokens"] = 100;
    req["temperature"] = 1;
    req["seed"] = 5;
    req["n"] = 2;
    auto answers = chat(req, stream);
    ASSERT_EQ(answers.size(), 2u);
    for (const auto& a : answers) {
      EXPECT_EQ(a.finish_reason, "stop");  // a forced function keeps "stop", as vLLM and OpenAI
      ASSERT_EQ(a.calls.size(), 1u);
      EXPECT_EQ(a.calls[0].name, "get_time");
      expect_valid_call(a.calls[0]);
    }
  }
}

}  // namespace
}  // namespace strata::server
