#include "server/response_assembler.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>

#include "core/json.h"
#include "net/sse.h"
#include "server/reasoning_parsers.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

// A logprob as JSON: the shortest decimal that reads back as the same float (-0.2, not
// -0.20000000298023224). OpenAI cannot carry -inf; vLLM reports it as -9999.0.
double lp_value(float lp) {
  if (std::isnan(lp) || lp < -9999.0f) return -9999.0;
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof(buf) - 1, lp);
  *r.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// Length in Unicode code points (text_offset counts characters, as Python strings do).
int64_t code_points(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

OrderedJson bytes_of(const std::string& s) {
  OrderedJson b = OrderedJson::array();
  for (unsigned char c : s) b.push_back(static_cast<int>(c));
  return b;
}

OrderedJson stop_reason_json(const engine::OutputChunk& c) {
  if (std::holds_alternative<int32_t>(c.stop_reason)) return std::get<int32_t>(c.stop_reason);
  if (std::holds_alternative<std::string>(c.stop_reason))
    return std::get<std::string>(c.stop_reason);
  return nullptr;
}

}  // namespace

struct ResponseAssembler::Choice {
  bool started = false;
  bool finished = false;
  std::string text;  // one-body responses: everything so far (echo included)
  std::string finish_reason;
  OrderedJson stop_reason;
  int64_t num_tokens = 0;
  int64_t text_offset = 0;  // completions logprobs: characters so far
  // Completions logprobs of the generated tokens (one-body responses); offsets start at 0.
  OrderedJson completion_lp;
  // Chat logprobs "content" (one-body responses).
  OrderedJson content = OrderedJson::array();
  // Streams whose output is parsed (tools, reasoning): the choice's parser.
  std::unique_ptr<ChatOutputParser> parser;
};

struct ResponseAssembler::Prompt {
  std::vector<int32_t> ids;
  std::string text;
  bool prompt_logprobs_known = false;
  std::vector<std::optional<sampling::TokenLogprobs>> prompt_logprobs;
  std::vector<engine::OutputChunk> pending;  // streams: chunks waiting for prompt logprobs
};

ResponseAssembler::ResponseAssembler(const GenerationRequest& request, ResponseContext context)
    : request_(request), ctx_(std::move(context)) {
  for (const auto& p : request_.prompts) {
    Prompt pr;
    pr.ids = p.token_ids;
    pr.text = p.text;
    pr.prompt_logprobs_known = !request_.params.prompt_logprobs.has_value();
    prompts_.push_back(std::move(pr));
  }
  choices_.resize(prompts_.size() * static_cast<size_t>(request_.params.n));
  for (auto& c : choices_) c.stop_reason = nullptr;
  request_.prompts.clear();  // kept in prompts_
}

ResponseAssembler::~ResponseAssembler() = default;

bool ResponseAssembler::all_finished() const {
  return num_finished_ == static_cast<int>(choices_.size());
}

std::string ResponseAssembler::token_text(int32_t id) const {
  if (request_.return_tokens_as_token_ids || !ctx_.tokenizer)
    return "token_id:" + std::to_string(id);
  const int32_t one[1] = {id};
  return ctx_.tokenizer->decode(one, /*skip_special_tokens=*/false);
}

int64_t ResponseAssembler::prompt_tokens() const {
  int64_t n = 0;
  for (const auto& p : prompts_) n += static_cast<int64_t>(p.ids.size());
  return n;
}

int64_t ResponseAssembler::completion_tokens() const {
  int64_t n = 0;
  for (const auto& c : choices_) n += c.num_tokens;
  return n;
}

std::unique_ptr<ChatOutputParser> ResponseAssembler::make_output_parser(int prompt_index) const {
  const ChatOutputOptions& o = request_.chat_output;
  std::unique_ptr<ReasoningParser> reasoning;
  if (!o.reasoning_parser.empty()) {
    auto r = ReasoningParser::create(o.reasoning_parser, prompts_[prompt_index].text, o.thinking);
    if (r.ok()) reasoning = std::move(r).value();  // names are checked at start-up
  }
  std::unique_ptr<ToolCallParser> tools;
  if (o.tool_choice == ToolChoice::kAuto && !o.tool_parser.empty()) {
    auto t = make_tool_parser(o.tool_parser, o.tools.get(), o.parallel_tool_calls);
    if (t.ok()) tools = std::move(t).value();
  } else if (o.tool_choice == ToolChoice::kRequired) {
    tools = make_required_tool_parser(o.parallel_tool_calls);
  } else if (o.tool_choice == ToolChoice::kNamed) {
    tools = make_named_tool_parser(o.named_tool);
  }
  return std::make_unique<ChatOutputParser>(std::move(reasoning), std::move(tools));
}

namespace {

// A streaming delta's tool_calls entries, as OpenAI (and vLLM) send them.
OrderedJson tool_call_deltas_json(const std::vector<ToolCallDelta>& calls) {
  OrderedJson out = OrderedJson::array();
  for (const auto& t : calls) {
    OrderedJson e;
    e["index"] = t.index;
    if (t.first) {
      e["id"] = t.id;
      e["type"] = "function";
      e["function"]["name"] = t.name;
    }
    e["function"]["arguments"] = t.arguments;
    out.push_back(std::move(e));
  }
  return out;
}

// The finish reason of a choice whose output was parsed: "tool_calls" when it made calls and
// stopped by itself, except under a named tool_choice, where vLLM and OpenAI keep "stop".
std::string parsed_finish_reason(const std::string& reason, const ChatOutputParser& p,
                                 ToolChoice choice) {
  if (choice == ToolChoice::kNamed) return reason;
  return (reason == "stop" && !p.tool_calls().empty()) ? "tool_calls" : reason;
}

OrderedJson usage_object(int64_t prompt, int64_t completion) {
  OrderedJson u;
  u["prompt_tokens"] = prompt;
  u["completion_tokens"] = completion;
  u["total_tokens"] = prompt + completion;
  return u;
}

}  // namespace

namespace {

// Completions logprobs: appends one position (token, its logprob, the top alternatives with the
// token itself first, as vLLM reports them).
void append_completion_lp(OrderedJson& lp, const std::string& token,
                          const sampling::TokenLogprobs* tl, int num_top,
                          const std::function<std::string(int32_t)>& text_of, int64_t* offset) {
  lp["tokens"].push_back(token);
  lp["text_offset"].push_back(*offset);
  *offset += code_points(token);
  if (tl == nullptr) {
    lp["token_logprobs"].push_back(nullptr);
    lp["top_logprobs"].push_back(nullptr);
    return;
  }
  lp["token_logprobs"].push_back(lp_value(tl->chosen.logprob));
  OrderedJson top = OrderedJson::object();
  top[token] = lp_value(tl->chosen.logprob);
  for (const auto& alt : tl->top) {
    if (static_cast<int>(top.size()) >= num_top + 1) break;
    if (alt.token_id == tl->chosen.token_id) continue;
    std::string s = text_of(alt.token_id);
    if (!top.contains(s)) top[s] = lp_value(alt.logprob);
  }
  lp["top_logprobs"].push_back(std::move(top));
}

OrderedJson empty_completion_lp() {
  OrderedJson lp;
  lp["text_offset"] = OrderedJson::array();
  lp["token_logprobs"] = OrderedJson::array();
  lp["tokens"] = OrderedJson::array();
  lp["top_logprobs"] = OrderedJson::array();
  return lp;
}

OrderedJson chat_lp_entry(const std::string& token, const sampling::TokenLogprobs& tl, int num_top,
                          const std::function<std::string(int32_t)>& text_of) {
  OrderedJson e;
  e["token"] = token;
  e["logprob"] = lp_value(tl.chosen.logprob);
  e["bytes"] = bytes_of(token);
  OrderedJson top = OrderedJson::array();
  for (const auto& alt : tl.top) {
    if (static_cast<int>(top.size()) >= num_top) break;
    std::string s = text_of(alt.token_id);
    OrderedJson t;
    t["token"] = s;
    t["logprob"] = lp_value(alt.logprob);
    t["bytes"] = bytes_of(s);
    top.push_back(std::move(t));
  }
  e["top_logprobs"] = std::move(top);
  return e;
}

// vLLM's prompt_logprobs: null for the first token, then {"id": {logprob, rank, decoded_token}}.
OrderedJson prompt_logprobs_json(const std::vector<std::optional<sampling::TokenLogprobs>>& pl,
                                 const std::function<std::string(int32_t)>& text_of) {
  OrderedJson out = OrderedJson::array();
  for (const auto& e : pl) {
    if (!e) {
      out.push_back(nullptr);
      continue;
    }
    OrderedJson m = OrderedJson::object();
    auto put = [&](const sampling::Logprob& l) {
      std::string key = std::to_string(l.token_id);
      if (m.contains(key)) return;
      OrderedJson v;
      v["logprob"] = lp_value(l.logprob);
      v["rank"] = l.rank;
      v["decoded_token"] = text_of(l.token_id);
      m[key] = std::move(v);
    };
    put(e->chosen);
    for (const auto& t : e->top) put(t);
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

// Records what a chunk tells about its choice (tokens, finish) and its prompt.
void ResponseAssembler::absorb(int prompt_index, const engine::OutputChunk& chunk, Choice& c) {
  c.num_tokens = std::max(c.num_tokens, chunk.num_output_tokens);
  if (chunk.finished && !c.finished) {
    c.finished = true;
    c.finish_reason = chunk.finish_reason;
    c.stop_reason = stop_reason_json(chunk);
    ++num_finished_;
  }
  Prompt& p = prompts_[prompt_index];
  if (chunk.index == 0 && !p.prompt_logprobs_known && !chunk.prompt_logprobs.empty()) {
    p.prompt_logprobs = chunk.prompt_logprobs;
    p.prompt_logprobs_known = true;
  }
  if (chunk.index == 0 && chunk.finished) p.prompt_logprobs_known = true;  // never coming
}

std::string ResponseAssembler::stream_begin() {
  if (request_.kind != ApiKind::kChat) return "";
  std::string out;
  for (size_t i = 0; i < choices_.size(); ++i) {
    OrderedJson delta;
    delta["role"] = ctx_.role;
    delta["content"] = request_.echo_text;
    OrderedJson ch;
    ch["index"] = i;
    ch["delta"] = std::move(delta);
    ch["logprobs"] = nullptr;
    ch["finish_reason"] = nullptr;
    OrderedJson j;
    j["id"] = ctx_.id;
    j["object"] = "chat.completion.chunk";
    j["created"] = ctx_.created;
    j["model"] = ctx_.model;
    j["choices"] = OrderedJson::array({std::move(ch)});
    if (request_.include_usage) j["usage"] = nullptr;
    out += net::sse_format(dump(j));
    choices_[i].started = true;
  }
  return out;
}

std::string ResponseAssembler::stream_chunk(int prompt_index, const engine::OutputChunk& chunk) {
  Prompt& p = prompts_[prompt_index];
  if (!p.prompt_logprobs_known && chunk.index != 0) {
    p.pending.push_back(chunk);  // its echo needs choice 0's prompt logprobs
    return "";
  }
  std::string out = render_chunk(prompt_index, chunk);
  if (p.prompt_logprobs_known && !p.pending.empty()) {
    std::vector<engine::OutputChunk> pending;
    pending.swap(p.pending);
    for (const auto& c : pending) out += render_chunk(prompt_index, c);
  }
  return out;
}

std::string ResponseAssembler::render_chunk(int prompt_index, const engine::OutputChunk& chunk) {
  const int idx = prompt_index * request_.params.n + chunk.index;
  Choice& c = choices_[idx];
  const bool first = !c.started;
  absorb(prompt_index, chunk, c);
  Prompt& p = prompts_[prompt_index];
  auto text_of = [this](int32_t id) { return token_text(id); };
  OrderedJson ch;
  ch["index"] = idx;
  if (request_.kind == ApiKind::kCompletion) {
    std::string text = chunk.text;
    OrderedJson lp = nullptr;
    if (request_.logprobs) lp = empty_completion_lp();
    if (first && request_.echo) {
      text = p.text + text;
      if (request_.logprobs)
        for (size_t i = 0; i < p.ids.size(); ++i) {
          const sampling::TokenLogprobs* tl = (i < p.prompt_logprobs.size() && p.prompt_logprobs[i])
                                                  ? &*p.prompt_logprobs[i]
                                                  : nullptr;
          append_completion_lp(lp, token_text(p.ids[i]), tl, *request_.logprobs, text_of,
                               &c.text_offset);
        }
    }
    if (request_.logprobs)
      for (size_t k = 0; k < chunk.token_ids.size() && k < chunk.logprobs.size(); ++k)
        append_completion_lp(lp, token_text(chunk.token_ids[k]), &chunk.logprobs[k],
                             *request_.logprobs, text_of, &c.text_offset);
    ch["text"] = text;
    ch["logprobs"] = std::move(lp);
  } else {
    OrderedJson delta = OrderedJson::object();
    if (request_.chat_output.parsed()) {
      if (!c.parser) c.parser = make_output_parser(prompt_index);
      OutputDelta d = c.parser->feed(chunk.text);
      if (chunk.finished) d.append(c.parser->finish());
      // Nothing to say (a marker being read): no event, as vLLM skips the chunk.
      if (d.empty() && !chunk.finished && !request_.logprobs) return "";
      if (!d.content.empty()) delta["content"] = d.content;
      if (!d.reasoning.empty()) {
        delta["reasoning"] = d.reasoning;
        delta["reasoning_content"] = d.reasoning;
      }
      if (!d.tool_calls.empty()) delta["tool_calls"] = tool_call_deltas_json(d.tool_calls);
    } else if (!chunk.text.empty() || !chunk.finished) {
      delta["content"] = chunk.text;
    }
    ch["delta"] = std::move(delta);
    OrderedJson lp = nullptr;
    if (request_.logprobs) {
      lp = OrderedJson::object();
      lp["content"] = OrderedJson::array();
      for (size_t k = 0; k < chunk.token_ids.size() && k < chunk.logprobs.size(); ++k)
        lp["content"].push_back(chat_lp_entry(token_text(chunk.token_ids[k]), chunk.logprobs[k],
                                              *request_.logprobs, text_of));
    }
    ch["logprobs"] = std::move(lp);
  }
  std::string reason = chunk.finish_reason;
  if (chunk.finished && c.parser)
    reason = parsed_finish_reason(reason, *c.parser, request_.chat_output.tool_choice);
  ch["finish_reason"] = chunk.finished ? OrderedJson(reason) : OrderedJson(nullptr);
  ch["stop_reason"] = chunk.finished ? c.stop_reason : OrderedJson(nullptr);
  if (first && chunk.index == 0 && request_.report_prompt_logprobs)
    ch["prompt_logprobs"] = prompt_logprobs_json(p.prompt_logprobs, text_of);
  c.started = true;
  OrderedJson j;
  j["id"] = ctx_.id;
  j["object"] = request_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
  j["created"] = ctx_.created;
  j["model"] = ctx_.model;
  j["choices"] = OrderedJson::array({std::move(ch)});
  if (request_.continuous_usage_stats)
    j["usage"] = usage_object(prompt_tokens(), completion_tokens());
  else if (request_.include_usage)
    j["usage"] = nullptr;
  return net::sse_format(dump(j));
}

std::string ResponseAssembler::stream_end() {
  std::string out;
  // Chunks still held for prompt logprobs that never came (cannot happen unless choice 0 was
  // lost): send them rather than drop them.
  for (size_t p = 0; p < prompts_.size(); ++p) {
    prompts_[p].prompt_logprobs_known = true;
    std::vector<engine::OutputChunk> pending;
    pending.swap(prompts_[p].pending);
    for (const auto& c : pending) out += render_chunk(static_cast<int>(p), c);
  }
  if (request_.include_usage) {
    OrderedJson j;
    j["id"] = ctx_.id;
    j["object"] = request_.kind == ApiKind::kChat ? "chat.completion.chunk" : "text_completion";
    j["created"] = ctx_.created;
    j["model"] = ctx_.model;
    j["choices"] = OrderedJson::array();
    j["usage"] = usage_object(prompt_tokens(), completion_tokens());
    out += net::sse_format(dump(j));
  }
  out += net::sse_format("[DONE]");
  return out;
}

std::string ResponseAssembler::stream_error(const ApiError& error) {
  return net::sse_format(error_json(error)) + net::sse_format("[DONE]");
}

void ResponseAssembler::add(int prompt_index, const engine::OutputChunk& chunk) {
  const int idx = prompt_index * request_.params.n + chunk.index;
  Choice& c = choices_[idx];
  absorb(prompt_index, chunk, c);
  auto text_of = [this](int32_t id) { return token_text(id); };
  c.text += chunk.text;
  if (!request_.logprobs) return;
  for (size_t k = 0; k < chunk.token_ids.size() && k < chunk.logprobs.size(); ++k) {
    const std::string tok = token_text(chunk.token_ids[k]);
    if (request_.kind == ApiKind::kChat) {
      c.content.push_back(chat_lp_entry(tok, chunk.logprobs[k], *request_.logprobs, text_of));
    } else {
      if (c.completion_lp.is_null()) c.completion_lp = empty_completion_lp();
      append_completion_lp(c.completion_lp, tok, &chunk.logprobs[k], *request_.logprobs, text_of,
                           &c.text_offset);
    }
  }
}

std::string ResponseAssembler::final_body() const {
  auto text_of = [this](int32_t id) { return token_text(id); };
  OrderedJson choices = OrderedJson::array();
  const int n = request_.params.n;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    const Prompt& p = prompts_[i / n];
    std::string parsed_reason;  // the finish reason after parsing ("" when not parsed)
    OrderedJson ch;
    ch["index"] = i;
    if (request_.kind == ApiKind::kCompletion) {
      OrderedJson lp = nullptr;
      if (request_.logprobs) {
        lp = empty_completion_lp();
        int64_t offset = 0;
        if (request_.echo)
          for (size_t k = 0; k < p.ids.size(); ++k) {
            const sampling::TokenLogprobs* tl =
                (k < p.prompt_logprobs.size() && p.prompt_logprobs[k]) ? &*p.prompt_logprobs[k]
                                                                       : nullptr;
            append_completion_lp(lp, token_text(p.ids[k]), tl, *request_.logprobs, text_of,
                                 &offset);
          }
        if (!c.completion_lp.is_null()) {
          const OrderedJson& g = c.completion_lp;
          for (size_t k = 0; k < g["tokens"].size(); ++k) {
            lp["tokens"].push_back(g["tokens"][k]);
            lp["text_offset"].push_back(offset + g["text_offset"][k].get<int64_t>());
            lp["token_logprobs"].push_back(g["token_logprobs"][k]);
            lp["top_logprobs"].push_back(g["top_logprobs"][k]);
          }
        }
      }
      ch["text"] = request_.echo ? p.text + c.text : c.text;
      ch["logprobs"] = std::move(lp);
    } else {
      OrderedJson msg;
      msg["role"] = ctx_.role;
      msg["content"] = request_.echo_text + c.text;
      msg["refusal"] = nullptr;
      msg["tool_calls"] = OrderedJson::array();
      if (request_.chat_output.parsed()) {
        // Non-streaming extraction: the whole text through the same parsers.
        auto parser = make_output_parser(static_cast<int>(i / n));
        parser->feed(c.text);
        parser->finish();
        const std::string content = request_.echo_text + parser->content();
        msg["content"] = content.empty() ? OrderedJson(nullptr) : OrderedJson(content);
        for (const auto& call : parser->tool_calls()) {
          OrderedJson tc;
          tc["id"] = call.id;
          tc["type"] = "function";
          tc["function"]["name"] = call.name;
          tc["function"]["arguments"] = call.arguments;
          msg["tool_calls"].push_back(std::move(tc));
        }
        if (parser->has_reasoning_parser()) {
          const std::string& rs = parser->reasoning();
          msg["reasoning"] = rs.empty() ? OrderedJson(nullptr) : OrderedJson(rs);
          msg["reasoning_content"] = msg["reasoning"];
        }
        if (c.finished)
          parsed_reason =
              parsed_finish_reason(c.finish_reason, *parser, request_.chat_output.tool_choice);
      }
      ch["message"] = std::move(msg);
      if (request_.logprobs) {
        OrderedJson lp;
        lp["content"] = c.content;
        ch["logprobs"] = std::move(lp);
      } else {
        ch["logprobs"] = nullptr;
      }
    }
    ch["finish_reason"] = c.finished
                              ? OrderedJson(parsed_reason.empty() ? c.finish_reason : parsed_reason)
                              : OrderedJson(nullptr);
    ch["stop_reason"] = c.stop_reason;
    if (request_.report_prompt_logprobs)
      ch["prompt_logprobs"] = prompt_logprobs_json(p.prompt_logprobs, text_of);
    choices.push_back(std::move(ch));
  }
  OrderedJson j;
  j["id"] = ctx_.id;
  j["object"] = request_.kind == ApiKind::kChat ? "chat.completion" : "text_completion";
  j["created"] = ctx_.created;
  j["model"] = ctx_.model;
  j["choices"] = std::move(choices);
  j["usage"] = usage_object(prompt_tokens(), completion_tokens());
  return dump(j);
}

}  // namespace strata::server
