#include "server/routes.h"

#include "core/clock.h"
#include "core/json.h"
#include "core/strings.h"
#include "server/generation.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace strata::server {
namespace {

struct Route {
  const char* path;
  const char* method;
};

constexpr Route kRoutes[] = {
    {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"},
    {"/v1/models", "GET"},       {"/tokenize", "POST"},
    {"/detokenize", "POST"},     {"/health", "GET"},
    {"/version", "GET"},         {"/metrics", "GET"},
};

// Compares without an early exit, so response times do not reveal the key.
// `key` is not empty.
bool same_secret(std::string_view given, std::string_view key) {
  size_t diff = given.size() ^ key.size();
  for (size_t i = 0; i < given.size(); ++i)
    diff |= static_cast<unsigned char>(given[i] ^ key[i % key.size()]);
  return diff == 0;
}

std::string dump(const OrderedJson& j) {
  return j.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
}

net::HttpResponse json_ok(const OrderedJson& j) {
  return net::HttpResponse::json(200, dump(j));
}

}  // namespace

bool Routes::authorized(const net::HttpRequest& req) const {
  const std::string& key = st->config.api_key;
  if (key.empty() || !starts_with(req.path, "/v1")) return true;
  auto h = req.headers.get("Authorization");
  if (!h) return false;
  std::string_view v = trim(*h);
  if (v.size() < 7 || !net::iequals(v.substr(0, 7), "Bearer ")) return false;
  return same_secret(trim(v.substr(7)), key);
}

void Routes::dispatch(net::HttpRequest req, net::ResponseWriter w, size_t num_connections) {
  if (!authorized(req)) {
    net::HttpResponse r = error_response(
        {401,
         req.headers.has("Authorization")
             ? "invalid API key: the Authorization header does not carry the server's key"
             : "missing API key: send \"Authorization: Bearer <key>\" (the server was started "
               "with --api-key)",
         ""});
    r.headers.set("WWW-Authenticate", "Bearer");
    w.send(std::move(r));
    return;
  }
  const std::string& path = req.path;
  const std::string& method = req.method;
  const bool model_path = starts_with(path, "/v1/models/") && path.size() > 11;
  const Route* found = nullptr;
  for (const auto& r : kRoutes)
    if (path == r.path) found = &r;
  if (found == nullptr && !model_path) {
    w.send(error_response({404,
                           "Not Found: no route " + method + " " + path +
                               " (see /v1/completions, /v1/chat/completions, /v1/models)",
                           ""}));
    return;
  }
  const char* allowed = found ? found->method : "GET";
  if (method != allowed) {
    net::HttpResponse r = error_response(
        {405, "Method Not Allowed: " + path + " accepts " + allowed + ", not " + method, ""});
    r.headers.set("Allow", allowed);
    w.send(std::move(r));
    return;
  }
  if (model_path) return w.send(models(path.substr(11)));
  if (path == "/v1/completions")
    return generate(ApiKind::kCompletion, std::move(req), std::move(w));
  if (path == "/v1/chat/completions") return generate(ApiKind::kChat, std::move(req), std::move(w));
  if (path == "/v1/models") return w.send(models(""));
  if (path == "/tokenize" || path == "/detokenize") {
    const size_t size = req.body.size();
    const bool tok = path == "/tokenize";
    const ServerState* cst = st;
    return run_off_loop(
        st, size,
        [cst, tok, body = std::move(req.body)] {
          return tok ? tokenize(cst, body) : detokenize(cst, body);
        },
        [w](net::HttpResponse r) mutable { w.send(std::move(r)); });
  }
  if (path == "/metrics") return w.send(metrics(num_connections));
  if (path == "/health") {
    if (Status h = st->engine->health(); !h.ok())
      return w.send(error_response({503, "the engine failed: " + h.message(), ""}));
    if (st->draining) return w.send(error_response({503, "the server is shutting down", ""}));
    return w.send(net::HttpResponse::text(200, ""));
  }
  if (path == "/version") {
    OrderedJson j;
    j["version"] = st->config.version;
    return w.send(json_ok(j));
  }
}

namespace {

// The rest of a generation request, on the loop thread, once its body is parsed.
void start_generation(ServerState* st, ApiResult<GenerationRequest> parsed, net::ResponseWriter w,
                      double arrival) {
  if (st->draining) {
    st->metrics.count_rejected("shutting_down");
    return w.send(error_response({503, "the server is shutting down", "", 1}));
  }
  if (!parsed.ok()) return w.send(error_response(parsed.error()));
  GenerationRequest& r = parsed.value();
  if (!r.model.empty() && !st->config.serves(r.model))
    return w.send(error_response({404, "The model `" + r.model + "` does not exist.", "model"}));
  if (r.priority != 0 && !st->priority_scheduling)
    return w.send(error_response(
        {400,
         "priority was given but the server schedules first-come first-served; start it with "
         "--scheduling-policy priority",
         "priority"}));
  if (st->config.max_queued_requests > 0) {
    const int64_t waiting = st->engine->num_unfinished() - st->engine->stats().num_running;
    if (waiting >= st->config.max_queued_requests) {
      st->metrics.count_rejected("queue_full");
      return w.send(
          error_response({503,
                          "the server is busy: " + std::to_string(waiting) +
                              " requests are waiting (--max-queued-requests " +
                              std::to_string(st->config.max_queued_requests) + "); retry later",
                          "", 1}));
    }
  }
  Generation::start(st, std::move(r), std::move(w), arrival);
}

}  // namespace

void Routes::generate(ApiKind kind, net::HttpRequest req, net::ResponseWriter w) {
  const double arrival = now_seconds();
  if (st->draining) {
    st->metrics.count_rejected("shutting_down");
    return w.send(error_response({503, "the server is shutting down", "", 1}));
  }
  const size_t size = req.body.size();
  const ParseContext* ctx = &st->parse;
  ServerState* state = st;
  run_off_loop(
      st, size,
      [kind, ctx, body = std::move(req.body)]() -> ApiResult<GenerationRequest> {
        auto r = kind == ApiKind::kChat ? parse_chat_request(body, *ctx)
                                        : parse_completion_request(body, *ctx);
        if (!r.ok()) return r;
        if (auto e = attach_constraint(*ctx, &r.value())) return *e;
        return r;
      },
      [state, w, arrival](ApiResult<GenerationRequest> parsed) mutable {
        start_generation(state, std::move(parsed), std::move(w), arrival);
      });
}

net::HttpResponse Routes::models(const std::string& only) const {
  std::vector<std::string> names = st->config.served_model_names;
  if (names.empty()) names.push_back(st->config.model_path);
  OrderedJson data = OrderedJson::array();
  const int64_t created = static_cast<int64_t>(wall_seconds());
  for (const auto& name : names) {
    if (!only.empty() && name != only) continue;
    OrderedJson perm;
    perm["id"] = "modelperm-" + name;
    perm["object"] = "model_permission";
    perm["created"] = created;
    perm["allow_create_engine"] = false;
    perm["allow_sampling"] = true;
    perm["allow_logprobs"] = true;
    perm["allow_search_indices"] = false;
    perm["allow_view"] = true;
    perm["allow_fine_tuning"] = false;
    perm["organization"] = "*";
    perm["group"] = nullptr;
    perm["is_blocking"] = false;
    OrderedJson m;
    m["id"] = name;
    m["object"] = "model";
    m["created"] = created;
    m["owned_by"] = "strata";
    m["root"] = st->config.model_path;
    m["parent"] = nullptr;
    m["max_model_len"] = st->max_model_len;
    m["permission"] = OrderedJson::array({perm});
    if (!only.empty()) return json_ok(m);
    data.push_back(std::move(m));
  }
  if (!only.empty())
    return error_response({404, "The model `" + only + "` does not exist.", "model"});
  OrderedJson j;
  j["object"] = "list";
  j["data"] = std::move(data);
  return json_ok(j);
}

net::HttpResponse Routes::tokenize(const ServerState* st, const std::string& body) {
  auto t = parse_tokenize_request(body, st->parse);
  if (!t.ok()) return error_response(t.error());
  if (!t.value().model.empty() && !st->config.serves(t.value().model))
    return error_response({404, "The model `" + t.value().model + "` does not exist.", "model"});
  OrderedJson j;
  if (t.value().llama_cpp_shape) {
    OrderedJson tokens = OrderedJson::array();
    if (t.value().with_pieces && st->tokenizer) {
      // Each token's piece is the text it adds (a character split across tokens shows on the
      // token that completes it), so the pieces join into the decoded text.
      IncrementalDetokenizer detok(st->tokenizer, {}, /*skip_special_tokens=*/false);
      const auto& ids = t.value().token_ids;
      for (size_t i = 0; i < ids.size(); ++i) {
        OrderedJson tok;
        tok["id"] = ids[i];
        std::string piece = detok.add(ids[i]);
        if (i + 1 == ids.size()) piece += detok.flush();
        tok["piece"] = std::move(piece);
        tokens.push_back(std::move(tok));
      }
    } else {
      for (int32_t id : t.value().token_ids) tokens.push_back(id);
    }
    j["tokens"] = std::move(tokens);
    return json_ok(j);
  }
  j["count"] = t.value().token_ids.size();
  j["max_model_len"] = st->max_model_len;
  j["tokens"] = t.value().token_ids;
  if (t.value().return_token_strs && st->tokenizer) {
    OrderedJson strs = OrderedJson::array();
    for (int32_t id : t.value().token_ids) strs.push_back(st->tokenizer->id_to_piece(id));
    j["token_strs"] = std::move(strs);
  } else {
    j["token_strs"] = nullptr;
  }
  return json_ok(j);
}

net::HttpResponse Routes::detokenize(const ServerState* st, const std::string& body) {
  auto d = parse_detokenize_request(body);
  if (!d.ok()) return error_response(d.error());
  if (!d.value().model.empty() && !st->config.serves(d.value().model))
    return error_response({404, "The model `" + d.value().model + "` does not exist.", "model"});
  if (!st->tokenizer) return error_response({400, "this model has no tokenizer", ""});
  const int32_t V = st->tokenizer->vocab_size();
  for (int32_t id : d.value().token_ids)
    if (id >= V)
      return error_response({400,
                             "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                 std::to_string(V - 1) + ")",
                             "tokens"});
  OrderedJson j;
  j["prompt"] = st->tokenizer->decode(d.value().token_ids, /*skip_special_tokens=*/false);
  j["content"] = j["prompt"];  // llama-server's field name, for clients written against it
  return json_ok(j);
}

net::HttpResponse Routes::metrics(size_t num_connections) const {
  ServerGauges g;
  g.http_connections = static_cast<int64_t>(num_connections);
  g.requests_in_flight = static_cast<int64_t>(st->live.size());
  g.streams_paused = st->streams_paused;
  if (st->http != nullptr) {
    g.write_buffer_bytes = static_cast<int64_t>(st->http->buffered_bytes());
    g.connections_rejected = static_cast<int64_t>(st->http->num_rejected_connections());
  }
  net::HttpResponse r = net::HttpResponse::text(200, st->metrics.render(st->engine->stats(), g),
                                                "text/plain; version=0.0.4; charset=utf-8");
  return r;
}

}  // namespace strata::server
