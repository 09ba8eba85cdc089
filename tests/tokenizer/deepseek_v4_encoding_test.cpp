// The DeepSeek-V4 chat encoding (--tokenizer-mode deepseek_v4). Expected strings are written from
// the reference encoder's behaviour; the golden cases are reduced versions of the published test
// vectors in vllm-project/vllm tests/tokenizers_/fixtures/deepseek_v4/ (test_input_N.json and
// test_output_N.txt, rendered by tests/tokenizers_/test_deepseek_v4.py) and of the example in
// DeepSeek-V4's encoding/README.md; each case names the one it follows.
#include <gtest/gtest.h>

#include <string>

#include "core/json.h"
#include "tokenizer/deepseek_v4_encoding.h"

namespace strata {
namespace {

const std::string kBos = "<｜begin▁of▁sentence｜>";
const std::string kEos = "<｜end▁of▁sentence｜>";
const std::string kU = "<｜User｜>";
const std::string kA = "<｜Assistant｜>";

OrderedJson js(const std::string& text) {
  auto j = parse_ordered_json(text, "test");
  EXPECT_TRUE(j.ok()) << j.status().message();
  return j.ok() ? std::move(j).value() : OrderedJson();
}

DeepseekV4Mode thinking_mode(bool thinking, const std::string& effort = "") {
  DeepseekV4Mode m;
  m.thinking = thinking;
  m.reasoning_effort = effort;
  return m;
}

std::string encode(const std::string& messages, DeepseekV4Mode mode,
                   const std::string& tools = "") {
  OrderedJson m = js(messages);
  OrderedJson t = tools.empty() ? OrderedJson() : js(tools);
  DeepseekV4Inputs in;
  in.messages = &m;
  in.tools = tools.empty() ? nullptr : &t;
  in.mode = mode;
  auto r = encode_deepseek_v4(in);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

std::string encode_error(const std::string& messages, const std::string& tools = "") {
  OrderedJson m = js(messages);
  OrderedJson t = tools.empty() ? OrderedJson() : js(tools);
  DeepseekV4Inputs in;
  in.messages = &m;
  in.tools = tools.empty() ? nullptr : &t;
  auto r = encode_deepseek_v4(in);
  EXPECT_FALSE(r.ok()) << "encoded: " << (r.ok() ? *r : "");
  return r.ok() ? "" : r.status().message();
}

// The "## Tools" block with `schemas` (one JSON object per line), as the reference renders it.
std::string tools_block(const std::string& schemas) {
  const std::string d = "｜DSML｜";
  return "## Tools\n\nYou have access to a set of tools to help answer the user's question. You "
         "can invoke tools by writing a \"<" +
         d + "tool_calls>\" block like the following:\n\n<" + d + "tool_calls>\n<" + d +
         "invoke name=\"$TOOL_NAME\">\n<" + d +
         "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d +
         "parameter>\n...\n</" + d + "invoke>\n<" + d + "invoke name=\"$TOOL_NAME2\">\n...\n</" +
         d + "invoke>\n</" + d +
         "tool_calls>\n\nString parameters should be specified as is and set `string=\"true\"`. "
         "For all other types (numbers, booleans, arrays, objects), pass the value in JSON format "
         "and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you "
         "MUST output your complete reasoning inside <think>...</think> BEFORE any tool calls or "
         "final response.\n\nOtherwise, output directly after </think> with tool calls or final "
         "response.\n\n### Available Tool Schemas\n\n" +
         schemas +
         "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
         "invoke tool calls.\n";
}

std::string dsml_call(const std::string& name, const std::string& params) {
  return "<｜DSML｜invoke name=\"" + name + "\">\n" + params + "\n</｜DSML｜invoke>";
}
std::string dsml_param(const std::string& name, bool is_string, const std::string& value) {
  return "<｜DSML｜parameter name=\"" + name + "\" string=\"" + (is_string ? "true" : "false") +
         "\">" + value + "</｜DSML｜parameter>";
}
std::string dsml_block(const std::string& calls) {
  return "\n\n<｜DSML｜tool_calls>\n" + calls + "\n</｜DSML｜tool_calls>";
}

// encoding/README.md, "Quick Start": system + user in thinking mode.
TEST(DeepseekV4Encoding, ReadmeQuickStart) {
  EXPECT_EQ(encode(R"([{"role": "system", "content": "You are a helpful assistant."},
                       {"role": "user", "content": "What is 2+2?"}])",
                   thinking_mode(true)),
            kBos + "You are a helpful assistant." + kU + "What is 2+2?" + kA + "<think>");
}

TEST(DeepseekV4Encoding, ChatModeGenerationPrompt) {
  EXPECT_EQ(encode(R"([{"role": "user", "content": "Hello"}])", thinking_mode(false)),
            kBos + kU + "Hello" + kA + "</think>");
}

// Fixture 1 (test_input_1.json, kwargs thinking=True): tools on the system message, an assistant
// turn with reasoning and a tool call, the tool result folded into a user turn, the final answer.
// With tools in play, earlier reasoning is kept. (The fixture has two tools; one here.)
TEST(DeepseekV4Encoding, Fixture1ToolRoundTripKeepsReasoning) {
  const std::string tools = R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Get the weather for a specific location",
      "parameters": {"type": "object", "properties": {
          "location": {"type": "string", "description": "The city name"},
          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
        "required": ["location"]}}}])";
  const std::string messages = R"([
      {"role": "system", "content": "You are a helpful assistant."},
      {"role": "user", "content": "What's the weather in Beijing?"},
      {"role": "assistant", "reasoning": "I should use the get_weather tool.",
       "tool_calls": [{"id": "call_001", "type": "function", "function": {
           "name": "get_weather",
           "arguments": "{\"location\": \"Beijing\", \"unit\": \"celsius\"}"}}]},
      {"role": "tool", "tool_call_id": "call_001", "content": "{\"temperature\": 22}"},
      {"role": "assistant", "reasoning": "Got the data.", "content": "Sunny, 22°C."}])";
  const std::string schema =
      R"({"name": "get_weather", "description": "Get the weather for a specific location", )"
      R"("parameters": {"type": "object", "properties": {"location": {"type": "string", )"
      R"("description": "The city name"}, "unit": {"type": "string", "enum": ["celsius", )"
      R"("fahrenheit"]}}, "required": ["location"]}})";
  const std::string expected =
      kBos + "You are a helpful assistant.\n\n" + tools_block(schema) + kU +
      "What's the weather in Beijing?" + kA + "<think>I should use the get_weather tool.</think>" +
      dsml_block(dsml_call("get_weather", dsml_param("location", true, "Beijing") + "\n" +
                                              dsml_param("unit", true, "celsius"))) +
      kEos + kU + "<tool_result>{\"temperature\": 22}</tool_result>" + kA +
      "<think>Got the data.</think>Sunny, 22°C." + kEos;
  EXPECT_EQ(encode(messages, thinking_mode(true, "high"), tools), expected);
}

// Request tools with no leading system message: a new, empty system message carries them.
TEST(DeepseekV4Encoding, RequestToolsWithoutSystemMessage) {
  const std::string tools =
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])";
  EXPECT_EQ(encode(R"([{"role": "user", "content": "Hi"}])", thinking_mode(false), tools),
            kBos + "\n\n" + tools_block(R"({"name": "f", "parameters": {"type": "object"}})") + kU +
                "Hi" + kA + "</think>");
}

// Fixture 3 (test_input_3.json, reduced): system, latest_reminder, a developer message carrying
// its own tools, a tool call with an empty content, its result, the answer.
TEST(DeepseekV4Encoding, Fixture3DeveloperToolsAndLatestReminder) {
  const std::string messages = R"([
      {"role": "system", "content": "该助手为DeepSeek。"},
      {"role": "latest_reminder", "content": "2026-02-21,广州"},
      {"role": "developer", "content": "能一起吃吗？", "tools": [{"type": "function",
          "function": {"name": "search", "parameters": {"type": "object",
              "properties": {"queries": {"type": "string"}}, "additionalProperties": false}}}]},
      {"role": "assistant", "content": "", "reasoning": "先搜索。", "tool_calls": [
          {"type": "function", "function": {"name": "search",
                                            "arguments": "{\"queries\": \"相互作用\"}"}}]},
      {"role": "tool", "content": "[0]"},
      {"role": "assistant", "content": "请及时就医。", "reasoning": "组织回答。", "tool_calls": []}])";
  const std::string schema =
      R"({"name": "search", "parameters": {"type": "object", "properties": {"queries": )"
      R"({"type": "string"}}, "additionalProperties": false}})";
  const std::string expected =
      kBos + "该助手为DeepSeek。<｜latest_reminder｜>2026-02-21,广州" + kU + "能一起吃吗？\n\n" +
      tools_block(schema) + kA + "<think>先搜索。</think>" +
      dsml_block(dsml_call("search", dsml_param("queries", true, "相互作用"))) + kEos + kU +
      "<tool_result>[0]</tool_result>" + kA + "<think>组织回答。</think>请及时就医。" + kEos;
  EXPECT_EQ(encode(messages, thinking_mode(true, "high")), expected);
}

// Fixture 4 (test_input_4.json, reduced; kwargs thinking=False): chat mode history and a user
// message with task "action", whose answer follows the <｜action｜> token.
TEST(DeepseekV4Encoding, Fixture4ChatModeAndActionTask) {
  const std::string messages = R"([
      {"role": "system", "content": "S"},
      {"role": "latest_reminder", "content": "2024-11-15,上海市"},
      {"role": "user", "content": "Q1"},
      {"role": "assistant", "content": "A1", "mask": 1},
      {"role": "user", "content": "Q2", "task": "action"},
      {"role": "assistant", "content": "Search"}])";
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos + "S<｜latest_reminder｜>2024-11-15,上海市" + kU + "Q1" + kA + "</think>A1" +
                kEos + kU + "Q2" + kA + "</think><｜action｜>Search" + kEos);
  // In thinking mode the action header opens <think>, and the answer to a task has no reasoning.
  EXPECT_EQ(encode(messages, thinking_mode(true)),
            kBos + "S<｜latest_reminder｜>2024-11-15,上海市" + kU + "Q1" + kA + "</think>A1" +
                kEos + kU + "Q2" + kA + "<think><｜action｜>Search" + kEos);
}

TEST(DeepseekV4Encoding, EarlierReasoningIsDropped) {
  const std::string messages = R"([
      {"role": "user", "content": "Q1"},
      {"role": "assistant", "reasoning_content": "r1", "content": "A1"},
      {"role": "user", "content": "Q2"}])";
  EXPECT_EQ(encode(messages, thinking_mode(true)),
            kBos + kU + "Q1" + kA + "</think>A1" + kEos + kU + "Q2" + kA + "<think>");
  DeepseekV4Mode keep = thinking_mode(true);
  keep.drop_thinking = false;
  EXPECT_EQ(encode(messages, keep),
            kBos + kU + "Q1" + kA + "<think>r1</think>A1" + kEos + kU + "Q2" + kA + "<think>");
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos + kU + "Q1" + kA + "</think>A1" + kEos + kU + "Q2" + kA + "</think>");
}

// A developer message before the last user message is dropped in thinking mode (drop_thinking).
TEST(DeepseekV4Encoding, EarlierDeveloperMessageDropped) {
  const std::string messages = R"([
      {"role": "developer", "content": "D"},
      {"role": "assistant", "content": "A"},
      {"role": "user", "content": "Q"}])";
  EXPECT_EQ(encode(messages, thinking_mode(true)), kBos + "A" + kEos + kU + "Q" + kA + "<think>");
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos + kU + "D" + kA + "</think>A" + kEos + kU + "Q" + kA + "</think>");
}

// vLLM test_deepseek_v4_merges_consecutive_assistant_messages_drop_thinking, single-turn form:
// without request tools, the reasoning of the tool-calling turn (now before the last "user"
// turn, the tool result) is dropped.
TEST(DeepseekV4Encoding, ToolCallHistoryWithoutToolsDropsReasoning) {
  const std::string messages = R"([
      {"role": "user", "content": "Check the server"},
      {"role": "assistant", "content": "Let me check.", "reasoning": "run uptime",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "shell_exec", "arguments": "{\"command\": \"uptime\"}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "up 5 days"}])";
  EXPECT_EQ(encode(messages, thinking_mode(true)),
            kBos + kU + "Check the server" + kA + "</think>Let me check." +
                dsml_block(dsml_call("shell_exec", dsml_param("command", true, "uptime"))) + kEos +
                kU + "<tool_result>up 5 days</tool_result>" + kA + "<think>");
}

// Parallel results come back in call order; a user message after them joins the same turn.
TEST(DeepseekV4Encoding, ToolResultsSortedAndMergedWithFollowingUser) {
  const std::string messages = R"([
      {"role": "user", "content": "Q"},
      {"role": "assistant", "content": null, "tool_calls": [
          {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
          {"id": "b", "type": "function", "function": {"name": "g", "arguments": null}}]},
      {"role": "tool", "tool_call_id": "b", "content": "B"},
      {"role": "tool", "tool_call_id": "a", "content": [{"type": "text", "text": "A1"},
                                                        {"type": "text", "text": "A2"}]},
      {"role": "user", "content": "thanks"}])";
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos + kU + "Q" + kA + "</think>" +
                dsml_block(dsml_call("f", "") + "\n" + dsml_call("g", "")) + kEos + kU +
                "<tool_result>A1\nA2</tool_result>\n\n<tool_result>B</tool_result>\n\nthanks" + kA +
                "</think>");
}

// Non-string arguments are JSON as Python's json.dumps writes it (", " and ": ", no ASCII
// escaping, key order kept); arguments may also be given as an object.
TEST(DeepseekV4Encoding, NonStringArgumentsAsPythonJson) {
  const std::string messages = R"([
      {"role": "user", "content": "Q"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
          "name": "f", "arguments": {"n": 3, "x": 1.5, "y": 2.0, "ok": true, "none": null,
                                     "list": [1, "é\n"], "obj": {"b": 1, "a": "q\"t"},
                                     "s": "raw \"text\""}}}]}])";
  const std::string params =
      dsml_param("n", false, "3") + "\n" + dsml_param("x", false, "1.5") + "\n" +
      dsml_param("y", false, "2.0") + "\n" + dsml_param("ok", false, "true") + "\n" +
      dsml_param("none", false, "null") + "\n" + dsml_param("list", false, "[1, \"é\\n\"]") + "\n" +
      dsml_param("obj", false, "{\"b\": 1, \"a\": \"q\\\"t\"}") + "\n" +
      dsml_param("s", true, "raw \"text\"");
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos + kU + "Q" + kA + "</think>" + dsml_block(dsml_call("f", params)) + kEos);
}

TEST(DeepseekV4Encoding, ResponseFormatBlock) {
  const std::string messages = R"([
      {"role": "system", "content": "S", "response_format": {"type": "json_schema",
          "json_schema": {"name": "r", "schema": {"type": "object"}}}},
      {"role": "user", "content": "Q"}])";
  EXPECT_EQ(encode(messages, thinking_mode(false)),
            kBos +
                "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to "
                "reply:\n{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"r\", "
                "\"schema\": {\"type\": \"object\"}}}" +
                kU + "Q" + kA + "</think>");
  // Given with the request instead, it joins the leading system message in the same way.
  OrderedJson m = js(R"([{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}])");
  OrderedJson rf = js(R"({"type": "json_object"})");
  DeepseekV4Inputs in;
  in.messages = &m;
  in.response_format = &rf;
  in.mode = thinking_mode(false);
  auto r = encode_deepseek_v4(in);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, kBos +
                    "S\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema "
                    "to reply:\n{\"type\": \"json_object\"}" +
                    kU + "Q" + kA + "</think>");
}

TEST(DeepseekV4Encoding, ReasoningEffortMax) {
  const std::string max_para =
      "Reasoning Effort: Absolute maximum with no shortcuts permitted.\nYou MUST be very thorough "
      "in your thinking and comprehensively decompose the problem to resolve the root cause, "
      "rigorously stress-testing your logic against all potential paths, edge cases, and "
      "adversarial scenarios.\nExplicitly write out your entire deliberation process, "
      "documenting every intermediate step, considered alternative, and rejected hypothesis to "
      "ensure absolutely no assumption is left unchecked.\n\n";
  const std::string messages = R"([{"role": "system", "content": "S"},
                                   {"role": "user", "content": "Q"}])";
  EXPECT_EQ(encode(messages, thinking_mode(true, "max")),
            kBos + max_para + "S" + kU + "Q" + kA + "<think>");
  // High effort adds nothing; in chat mode max adds nothing either.
  EXPECT_EQ(encode(messages, thinking_mode(true, "high")), kBos + "S" + kU + "Q" + kA + "<think>");
  EXPECT_EQ(encode(messages, thinking_mode(false, "max")), kBos + "S" + kU + "Q" + kA + "</think>");
}

TEST(DeepseekV4Encoding, GenerationPromptAndContinuation) {
  OrderedJson m = js(R"([{"role": "user", "content": "Q"}])");
  DeepseekV4Inputs in;
  in.messages = &m;
  in.add_generation_prompt = false;
  auto r = encode_deepseek_v4(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, kBos + kU + "Q");
  // A final assistant message left open: by continue_final_message or DeepSeek's "prefix".
  OrderedJson m2 = js(R"([{"role": "user", "content": "Write code"},
                          {"role": "assistant", "content": "```python\n"}])");
  in.messages = &m2;
  in.add_generation_prompt = true;
  in.continue_final_message = true;
  in.mode = thinking_mode(false);
  r = encode_deepseek_v4(in);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, kBos + kU + "Write code" + kA + "</think>```python\n");
  EXPECT_EQ(encode(R"([{"role": "user", "content": "Write code"},
                       {"role": "assistant", "content": "```python\n", "prefix": true}])",
                   thinking_mode(true)),
            kBos + kU + "Write code" + kA + "<think></think>```python\n");
}

TEST(DeepseekV4Encoding, ContentPartsJoined) {
  EXPECT_EQ(encode(R"([{"role": "user", "content": [{"type": "text", "text": "a"},
                                                    {"type": "text", "text": "b"}]}])",
                   thinking_mode(false)),
            kBos + kU + "a\nb" + kA + "</think>");
}

TEST(DeepseekV4Encoding, Errors) {
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string e = encode_error(R"([{"role": "function", "content": "x"}])");
  EXPECT_TRUE(has(e, "messages[0].role") && has(e, "'function'")) << e;
  e = encode_error(R"([{"role": "user", "content": "Q"}, {"role": "assistant",
                      "tool_calls": [{"type": "function"}]}])");
  EXPECT_TRUE(has(e, "messages[1].tool_calls[0]") && has(e, "function")) << e;
  e = encode_error(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f",
                      "arguments": "{not json"}}]}])");
  EXPECT_TRUE(has(e, "messages[0].tool_calls[0].function.arguments") && has(e, "not valid JSON"))
      << e;
  e = encode_error(R"([{"role": "assistant", "tool_calls": [{"function": {"name": "f",
                      "arguments": "[1, 2]"}}]}])");
  EXPECT_TRUE(has(e, "must be a JSON object")) << e;
  e = encode_error(R"([{"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]}])");
  EXPECT_TRUE(has(e, "function.name")) << e;
  e = encode_error(R"([{"role": "assistant", "tool_calls": {"function": {}}}])");
  EXPECT_TRUE(has(e, "messages[0].tool_calls") && has(e, "array")) << e;
  e = encode_error(R"([{"role": "developer", "content": ""}])");
  EXPECT_TRUE(has(e, "developer")) << e;
  e = encode_error(R"([{"role": "user", "content": "x", "task": "summarize"}])");
  EXPECT_TRUE(has(e, "messages[0].task")) << e;
  e = encode_error(R"([{"role": "user", "content": [{"type": "image_url"}]}])");
  EXPECT_TRUE(has(e, "messages[0].content[0]")) << e;
  e = encode_error(R"([{"role": "user", "content": "x"}])", R"([{"type": "function"}])");
  EXPECT_TRUE(has(e, "tools[0]")) << e;
  OrderedJson m = js(R"([{"role": "user", "content": "Q"}])");
  DeepseekV4Inputs in;
  in.messages = &m;
  in.continue_final_message = true;
  EXPECT_FALSE(encode_deepseek_v4(in).ok());
}

TEST(DeepseekV4Mode, ResolvedLikeVllm) {
  auto mode = [](const std::string& kwargs, const std::string& effort,
                 const std::string& thinking = "") {
    OrderedJson k = kwargs.empty() ? OrderedJson() : js(kwargs);
    OrderedJson e = effort.empty() ? OrderedJson() : js(effort);
    OrderedJson t = thinking.empty() ? OrderedJson() : js(thinking);
    auto r = deepseek_v4_mode(kwargs.empty() ? nullptr : &k, effort.empty() ? nullptr : &e,
                              thinking.empty() ? nullptr : &t);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : DeepseekV4Mode{};
  };
  // Neither kwarg: thinking, high effort.
  DeepseekV4Mode m = mode("", "");
  EXPECT_TRUE(m.thinking);
  EXPECT_EQ(m.reasoning_effort, "high");
  EXPECT_FALSE(mode(R"({"thinking": false})", "").thinking);
  EXPECT_FALSE(mode(R"({"enable_thinking": false})", "").thinking);
  EXPECT_EQ(mode(R"({"enable_thinking": false})", "").reasoning_effort, "");
  EXPECT_TRUE(mode(R"({"thinking": false, "enable_thinking": true})", "").thinking);
  EXPECT_TRUE(mode(R"({"thinking": 1})", "").thinking);
  // reasoning_effort: none → chat; max; anything else → high; the request field wins over kwargs.
  m = mode(R"({"thinking": true})", R"("none")");
  EXPECT_FALSE(m.thinking);
  EXPECT_EQ(m.reasoning_effort, "");
  EXPECT_EQ(mode("", R"("max")").reasoning_effort, "max");
  EXPECT_EQ(mode("", R"("low")").reasoning_effort, "high");
  EXPECT_EQ(mode(R"({"reasoning_effort": "max"})", "").reasoning_effort, "max");
  EXPECT_EQ(mode(R"({"reasoning_effort": "max"})", R"("medium")").reasoning_effort, "high");
  EXPECT_FALSE(mode(R"({"drop_thinking": false})", "").drop_thinking);
  // DeepSeek API's thinking field, used when the kwargs say nothing.
  EXPECT_FALSE(mode("", "", R"({"type": "disabled"})").thinking);
  EXPECT_TRUE(mode(R"({"thinking": true})", "", R"({"type": "disabled"})").thinking);

  OrderedJson bad_effort = 3;
  EXPECT_FALSE(deepseek_v4_mode(nullptr, &bad_effort).ok());
  OrderedJson bad_kwargs = js(R"({"drop_thinking": "no"})");
  EXPECT_FALSE(deepseek_v4_mode(&bad_kwargs, nullptr).ok());
  OrderedJson bad_thinking = js(R"({"type": "on"})");
  EXPECT_FALSE(deepseek_v4_mode(nullptr, nullptr, &bad_thinking).ok());
}

}  // namespace
}  // namespace strata
