#include "bench/openai_protocol.h"

#include "core/json.h"

namespace strata::bench {

Result<Backend> parse_backend(const std::string& name) {
  if (name == "openai" || name == "vllm") return Backend::kCompletions;
  if (name == "openai-chat") return Backend::kChat;
  return invalid_argument("--backend '" + name +
                          "' is not supported; use openai (/v1/completions) or openai-chat "
                          "(/v1/chat/completions)");
}

const char* default_endpoint(Backend backend) {
  return backend == Backend::kChat ? "/v1/chat/completions" : "/v1/completions";
}

Result<std::vector<std::string>> build_payloads(Backend backend, const PayloadOptions& o,
                                                const std::vector<SampleRequest>& requests) {
  Json extra = Json::object();
  if (!o.extra_body_json.empty()) {
    auto parsed = parse_json(o.extra_body_json, "--extra-body");
    if (!parsed.ok()) return parsed.status();
    if (!parsed->is_object()) return invalid_argument("--extra-body must be a JSON object");
    extra = std::move(parsed).value();
  }
  std::vector<std::string> out;
  out.reserve(requests.size());
  for (const auto& r : requests) {
    Json body;
    body["model"] = o.model;
    if (backend == Backend::kChat) {
      body["messages"] = Json::array({Json{{"role", "user"}, {"content", r.prompt}}});
      body["max_completion_tokens"] = r.expected_output_len;
    } else {
      body["prompt"] = r.prompt;
      body["repetition_penalty"] = 1.0;
      body["max_tokens"] = r.expected_output_len;
      if (o.logprobs) body["logprobs"] = *o.logprobs;
    }
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    if (o.ignore_eos) body["ignore_eos"] = true;
    for (const auto& [k, v] : extra.items()) body[k] = v;
    out.push_back(body.dump(-1, ' ', false, Json::error_handler_t::replace));
  }
  return out;
}

StreamChunk parse_stream_chunk(std::string_view data, Backend backend) {
  StreamChunk c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  Json j = Json::parse(data.begin(), data.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    c.error = "the server streamed a payload that is not a JSON object: " +
              std::string(data.substr(0, 200));
    return c;
  }
  if (auto it = j.find("error"); it != j.end() && !it->is_null()) {
    const Json& e = *it;
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      c.error = "error event from the server: " + e["message"].get<std::string>();
    } else {
      c.error = "error event from the server: " + e.dump();
    }
    return c;
  }
  if (j.value("object", "") == "error") {
    c.error = "error event from the server: " + j.value("message", j.dump());
    return c;
  }
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    c.has_choices = true;
    const Json& choice = (*it)[0];
    if (backend == Backend::kChat) {
      if (auto d = choice.find("delta"); d != choice.end() && d->is_object()) {
        for (const char* key : {"reasoning_content", "reasoning", "content"}) {
          if (auto f = d->find(key); f != d->end() && f->is_string()) {
            c.text += f->get<std::string>();
          }
        }
      }
    } else if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
      c.text = t->get<std::string>();
    }
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
    if (auto p = u->find("prompt_tokens"); p != u->end() && p->is_number_integer()) {
      c.prompt_tokens = p->get<int64_t>();
    }
    if (auto p = u->find("completion_tokens"); p != u->end() && p->is_number_integer()) {
      c.completion_tokens = p->get<int64_t>();
    }
  }
  return c;
}

}  // namespace strata::bench
