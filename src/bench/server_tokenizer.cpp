#include <optional>

#include "bench/prompt_tokenizer.h"
#include "core/json.h"
#include "net/blocking_http.h"

namespace strata::bench {

namespace {

class ServerTokenizer : public PromptTokenizer {
 public:
  explicit ServerTokenizer(ServerTokenizerOptions o) : o_(std::move(o)) {}

  Result<std::vector<TokenIds>> encode(const std::vector<std::string>& texts) override {
    std::vector<std::string> bodies;
    for (const auto& t : texts) {
      bodies.push_back(
          tokenize_body(t, false).dump(-1, ' ', false, Json::error_handler_t::replace));
    }
    STRATA_ASSIGN_OR_RETURN(auto replies, post_all("/tokenize", std::move(bodies)));
    std::vector<TokenIds> out;
    out.reserve(replies.size());
    for (const auto& j : replies) {
      if (!j.contains("tokens") || !j["tokens"].is_array()) {
        return data_loss(url("/tokenize") + " answered without a \"tokens\" array");
      }
      TokenIds ids;
      for (const auto& v : j["tokens"]) {
        if (!v.is_number_integer()) return data_loss(url("/tokenize") + ": non-integer token");
        ids.push_back(v.get<int32_t>());
      }
      out.push_back(std::move(ids));
    }
    return out;
  }

  Result<std::vector<std::string>> decode(const std::vector<TokenIds>& ids) override {
    std::vector<std::string> bodies;
    for (const auto& t : ids) bodies.push_back(Json{{"model", o_.model}, {"tokens", t}}.dump());
    STRATA_ASSIGN_OR_RETURN(auto replies, post_all("/detokenize", std::move(bodies)));
    std::vector<std::string> out;
    for (const auto& j : replies) {
      // vLLM answers {"prompt": ...}; llama.cpp's server answers {"content": ...}.
      const char* key = j.contains("prompt") ? "prompt" : "content";
      if (!j.contains(key) || !j[key].is_string()) {
        return data_loss(url("/detokenize") + " answered without a \"prompt\" string");
      }
      out.push_back(j[key].get<std::string>());
    }
    return out;
  }

  int64_t vocab_size() const override { return 0; }

  int num_special_tokens_to_add() override {
    if (num_special_) return *num_special_;
    std::vector<std::string> bodies = {tokenize_body("hello", true).dump(),
                                       tokenize_body("hello", false).dump()};
    auto replies = post_all("/tokenize", std::move(bodies));
    int n = 0;
    if (replies.ok() && (*replies)[0].contains("tokens") && (*replies)[1].contains("tokens")) {
      n = static_cast<int>((*replies)[0]["tokens"].size()) -
          static_cast<int>((*replies)[1]["tokens"].size());
    }
    num_special_ = std::max(0, n);
    return *num_special_;
  }

  std::string description() const override { return "the server's " + url("/tokenize"); }

 private:
  std::string url(const std::string& path) const { return net::join_url(o_.base_url, path); }

  // vLLM (and Strata) read {"prompt", "add_special_tokens"}; llama.cpp's server reads
  // {"content", "add_special"}. The first call finds out which one the server speaks.
  Json tokenize_body(const std::string& text, bool add_special) {
    if (!style_) detect_style();
    if (*style_ == Style::kLlamaCpp) {
      return Json{{"content", text}, {"add_special", add_special}};
    }
    return Json{{"model", o_.model}, {"prompt", text}, {"add_special_tokens", add_special}};
  }

  void detect_style() {
    style_ = Style::kVllm;
    auto reply = post_all(
        "/tokenize",
        {Json{{"model", o_.model}, {"prompt", "hello"}, {"add_special_tokens", false}}.dump()});
    bool ok = reply.ok() && (*reply)[0].contains("tokens") && (*reply)[0]["tokens"].is_array() &&
              !(*reply)[0]["tokens"].empty();
    if (ok) return;
    auto alt = post_all("/tokenize", {Json{{"content", "hello"}, {"add_special", false}}.dump()});
    if (alt.ok() && (*alt)[0].contains("tokens") && (*alt)[0]["tokens"].is_array() &&
        !(*alt)[0]["tokens"].empty()) {
      style_ = Style::kLlamaCpp;
    }
  }

  Result<std::vector<Json>> post_all(const std::string& path, std::vector<std::string> bodies) {
    auto u = net::parse_url(url(path));
    if (!u.ok()) return u.status();
    std::vector<net::ClientRequest> reqs;
    reqs.reserve(bodies.size());
    for (auto& b : bodies) {
      auto r = net::json_post(*u, std::move(b), o_.timeout_s);
      for (const auto& [k, v] : o_.headers) r.headers.add(k, v);
      reqs.push_back(std::move(r));
    }
    auto results = net::http_fetch_all(std::move(reqs), o_.max_parallel);
    std::vector<Json> out;
    out.reserve(results.size());
    for (auto& r : results) {
      if (!r.ok()) return r.status().with_context("tokenizing through " + url(path));
      if (r->status != 200) {
        return unavailable(url(path) + " answered HTTP " + std::to_string(r->status) + ": " +
                           r->body.substr(0, 300) +
                           " (the server needs /tokenize and /detokenize, or pass --tokenizer "
                           "PATH to tokenize locally)");
      }
      auto j = parse_json(r->body, url(path) + " response");
      if (!j.ok()) return j.status();
      out.push_back(std::move(j).value());
    }
    return out;
  }

  enum class Style { kVllm, kLlamaCpp };
  ServerTokenizerOptions o_;
  std::optional<int> num_special_;
  std::optional<Style> style_;
};

}  // namespace

std::unique_ptr<PromptTokenizer> make_server_tokenizer(ServerTokenizerOptions options) {
  return std::make_unique<ServerTokenizer>(std::move(options));
}

}  // namespace strata::bench
