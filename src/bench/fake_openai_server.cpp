#include "bench/fake_openai_server.h"

#include <vector>

#include "core/json.h"
#include "net/sse.h"

namespace strata::bench {

namespace {
constexpr int32_t kBosId = 256;

std::string dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

net::HttpResponse json_response(int status, const Json& j) {
  return net::HttpResponse::json(status, dump(j));
}

int64_t count_prompt_tokens(const Json& body, bool chat) {
  int64_t n = 1;  // BOS
  if (chat) {
    if (body.contains("messages") && body["messages"].is_array()) {
      for (const auto& m : body["messages"]) {
        if (m.is_object() && m.contains("content") && m["content"].is_string()) {
          n += static_cast<int64_t>(m["content"].get_ref<const std::string&>().size());
        }
      }
    }
  } else if (body.contains("prompt") && body["prompt"].is_string()) {
    n += static_cast<int64_t>(body["prompt"].get_ref<const std::string&>().size());
  }
  return n;
}
}  // namespace

struct FakeOpenAiServer::Stream {
  net::ResponseWriter writer;
  bool chat = false;
  std::string id;
  int64_t prompt_tokens = 0;
  int64_t total = 0;
  int64_t sent = 0;
  int64_t cut_after = -1;  // disconnect injection
  bool error_at_end = false;
  bool usage = false;
  bool stopped = false;
  std::string middle;  // the SSE bytes of a chunk that is neither first nor last
};

FakeOpenAiServer::FakeOpenAiServer(net::EventLoop* loop, FakeServerOptions options)
    : loop_(loop), o_(std::move(options)) {
  net::HttpServerOptions so;
  so.port = 0;
  server_ = std::make_unique<net::HttpServer>(loop, so);
  server_->set_handler(
      [this](net::HttpRequest r, net::ResponseWriter w) { handle(std::move(r), std::move(w)); });
}

FakeOpenAiServer::~FakeOpenAiServer() {
  *alive_ = false;
}

Status FakeOpenAiServer::listen(const std::string& host, int port) {
  net::HttpServerOptions so = server_->options();
  so.host = host;
  so.port = port;
  server_ = std::make_unique<net::HttpServer>(loop_, so);
  server_->set_handler(
      [this](net::HttpRequest r, net::ResponseWriter w) { handle(std::move(r), std::move(w)); });
  return server_->listen();
}

void FakeOpenAiServer::handle(net::HttpRequest request, net::ResponseWriter writer) {
  const std::string& path = request.path;
  if (path == "/v1/models" && request.method == "GET") {
    writer.send(json_response(
        200, Json{{"object", "list"},
                  {"data", Json::array({Json{{"id", o_.model},
                                             {"object", "model"},
                                             {"created", 0},
                                             {"owned_by", "strata"},
                                             {"root", o_.model},
                                             {"max_model_len", o_.max_model_len}}})}}));
    return;
  }
  if (path == "/health") {
    writer.send(net::HttpResponse::text(200, ""));
    return;
  }
  if (request.method != "POST") {
    writer.send(net::default_error_response(404, "no route " + request.method + " " + path));
    return;
  }
  auto body = parse_json(request.body, "request body");
  if (!body.ok() || !body->is_object()) {
    writer.send(net::default_error_response(400, "the body must be a JSON object"));
    return;
  }
  bool llama = o_.tokenize_api == "llama.cpp";
  if ((path == "/tokenize" || path == "/detokenize") && o_.tokenize_api == "none") {
    writer.send(net::default_error_response(404, "no route POST " + path));
    return;
  }
  if (path == "/tokenize") {
    Json tokens = Json::array();
    bool special =
        llama ? body->value("add_special", false) : body->value("add_special_tokens", true);
    if (special) tokens.push_back(kBosId);
    std::string text;
    const char* key = llama ? "content" : "prompt";
    if (body->contains(key) && (*body)[key].is_string()) text = (*body)[key];
    for (unsigned char c : text) tokens.push_back(static_cast<int>(c));
    int64_t count = static_cast<int64_t>(tokens.size());
    writer.send(json_response(
        200, Json{{"tokens", tokens}, {"count", count}, {"max_model_len", o_.max_model_len}}));
    return;
  }
  if (path == "/detokenize") {
    std::string text;
    if (body->contains("tokens") && (*body)["tokens"].is_array()) {
      for (const auto& t : (*body)["tokens"]) {
        if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > kBosId) {
          writer.send(net::default_error_response(400, "token id out of range"));
          return;
        }
        if (t.get<int64_t>() != kBosId) text += static_cast<char>(t.get<int>());
      }
    }
    writer.send(json_response(200, Json{{llama ? "content" : "prompt", text}}));
    return;
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    generate(request, writer, path == "/v1/chat/completions");
    return;
  }
  writer.send(net::default_error_response(404, "no route POST " + path));
}

void FakeOpenAiServer::generate(const net::HttpRequest& request, net::ResponseWriter writer,
                                bool chat) {
  Json body = Json::parse(request.body, nullptr, false);
  int64_t k = ++generation_requests_;
  auto every = [k](int n) { return n > 0 && k % n == 0; };
  if (every(o_.hang_every)) {
    // Keep the writer alive without answering (until the client leaves): its timeout must fire.
    auto keep = std::make_shared<net::ResponseWriter>(writer);
    writer.on_disconnect([keep] {});
    return;
  }
  if (every(o_.fail_every)) {
    writer.send(
        net::default_error_response(500, "injected failure for request " + std::to_string(k)));
    return;
  }
  auto s = std::make_shared<Stream>();
  s->writer = writer;
  s->chat = chat;
  s->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(k);
  s->prompt_tokens = count_prompt_tokens(body, chat);
  const char* max_key =
      chat && body.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  s->total = body.contains(max_key) && body[max_key].is_number_integer()
                 ? std::max<int64_t>(1, body[max_key].get<int64_t>())
                 : o_.default_max_tokens;
  if (every(o_.disconnect_every)) s->cut_after = std::max<int64_t>(1, s->total / 2);
  s->error_at_end = every(o_.error_event_every);
  s->usage = o_.report_usage && body.contains("stream_options") &&
             body["stream_options"].is_object() &&
             body["stream_options"].value("include_usage", false);
  bool stream = body.value("stream", false);
  if (!stream) {
    std::string text;
    for (int64_t i = 0; i < s->total; ++i) text += o_.token_text;
    Json choice = chat ? Json{{"index", 0},
                              {"message", {{"role", "assistant"}, {"content", text}}},
                              {"finish_reason", "length"}}
                       : Json{{"index", 0}, {"text", text}, {"finish_reason", "length"}};
    writer.send(json_response(200, Json{{"id", s->id},
                                        {"object", chat ? "chat.completion" : "text_completion"},
                                        {"created", 0},
                                        {"model", o_.model},
                                        {"choices", Json::array({choice})},
                                        {"usage",
                                         {{"prompt_tokens", s->prompt_tokens},
                                          {"completion_tokens", s->total},
                                          {"total_tokens", s->prompt_tokens + s->total}}}}));
    return;
  }
  std::weak_ptr<Stream> weak = s;
  writer.on_disconnect([this, weak] {
    client_disconnects_++;
    if (auto st = weak.lock()) st->stopped = true;
  });
  writer.start_stream(200, net::sse_headers());
  std::weak_ptr<bool> alive = alive_;
  loop_->run_after(o_.ttft_s, [this, alive, s] {
    if (!alive.expired()) step(s);
  });
}

void FakeOpenAiServer::step(const std::shared_ptr<Stream>& s) {
  if (s->stopped) return;
  if (s->cut_after >= 0 && s->sent >= s->cut_after) {
    s->writer.abort();
    return;
  }
  s->sent++;
  bool first = s->sent == 1;
  bool last = s->sent == s->total;
  if (first || last || s->middle.empty()) {
    Json choice;
    if (s->chat) {
      Json delta = {{"content", o_.token_text}};
      if (first) delta["role"] = "assistant";
      choice = {{"index", 0},
                {"delta", delta},
                {"logprobs", nullptr},
                {"finish_reason", last ? Json("length") : Json(nullptr)}};
    } else {
      choice = {{"index", 0},
                {"text", o_.token_text},
                {"logprobs", nullptr},
                {"finish_reason", last ? Json("length") : Json(nullptr)}};
    }
    Json chunk = {{"id", s->id},
                  {"object", s->chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", 0},
                  {"model", o_.model},
                  {"choices", Json::array({choice})}};
    std::string event = net::sse_format(dump(chunk));
    if (!first && !last) s->middle = event;
    s->writer.write(std::move(event));
  } else {
    s->writer.write(s->middle);  // every middle chunk is the same bytes
  }
  chunks_sent_++;
  if (!last) {
    std::weak_ptr<bool> alive = alive_;
    loop_->run_after(o_.itl_s, [this, alive, s] {
      if (!alive.expired()) step(s);
    });
    return;
  }
  if (s->error_at_end) {
    s->writer.write(net::sse_format(dump(Json{
        {"error",
         {{"message", "injected error event"}, {"type", "InternalServerError"}, {"code", 500}}}})));
  } else if (s->usage) {
    s->writer.write(
        net::sse_format(dump(Json{{"id", s->id},
                                  {"object", s->chat ? "chat.completion.chunk" : "text_completion"},
                                  {"created", 0},
                                  {"model", o_.model},
                                  {"choices", Json::array()},
                                  {"usage",
                                   {{"prompt_tokens", s->prompt_tokens},
                                    {"completion_tokens", s->total},
                                    {"total_tokens", s->prompt_tokens + s->total}}}})));
  }
  s->writer.write(net::sse_format("[DONE]"));
  s->writer.end_stream();
}

}  // namespace strata::bench
