// A small scripted OpenAI-compatible server for tests and client benchmarks, built on the net/
// HTTP server. It streams `max_tokens` chunks per request: the first after ttft_s, then one
// every itl_s, then a usage chunk (when stream_options.include_usage) and [DONE]. Its tokenizer
// is byte-level (one token per byte; a BOS token when add_special_tokens), served on /tokenize
// and /detokenize. Failures can be injected for every k-th generation request.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "net/event_loop.h"
#include "net/http_server.h"

namespace strata::bench {

struct FakeServerOptions {
  std::string model = "fake-model";
  double ttft_s = 0.02;
  double itl_s = 0.005;
  int64_t default_max_tokens = 16;  // when the request gives no max_tokens
  std::string token_text = " tok";
  int64_t max_model_len = 1 << 20;
  // Failure injection on the k-th, 2k-th, ... generation request (0 = never).
  int fail_every = 0;         // HTTP 500 with an OpenAI error body
  int disconnect_every = 0;   // the stream is cut after half its tokens
  int error_event_every = 0;  // the stream ends with an error event instead of usage/[DONE]
  int hang_every = 0;         // the request is never answered
  bool report_usage = true;   // honour stream_options.include_usage
  // /tokenize and /detokenize: "vllm" ({"prompt"} -> {"tokens"}, {"tokens"} -> {"prompt"}),
  // "llama.cpp" ({"content"} -> {"tokens"}, {"tokens"} -> {"content"}) or "none" (404).
  std::string tokenize_api = "vllm";
};

class FakeOpenAiServer {
 public:
  FakeOpenAiServer(net::EventLoop* loop, FakeServerOptions options);
  ~FakeOpenAiServer();
  Status listen(const std::string& host = "127.0.0.1", int port = 0);
  int port() const { return server_->port(); }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  int64_t num_generation_requests() const { return generation_requests_.load(); }
  int64_t num_client_disconnects() const { return client_disconnects_.load(); }
  int64_t num_chunks_sent() const { return chunks_sent_.load(); }

 private:
  struct Stream;
  void handle(net::HttpRequest request, net::ResponseWriter writer);
  void generate(const net::HttpRequest& request, net::ResponseWriter writer, bool chat);
  void step(const std::shared_ptr<Stream>& s);

  net::EventLoop* loop_;
  FakeServerOptions o_;
  std::unique_ptr<net::HttpServer> server_;
  std::atomic<int64_t> generation_requests_{0};
  std::atomic<int64_t> client_disconnects_{0};
  std::atomic<int64_t> chunks_sent_{0};
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace strata::bench
