// One /v1/completions or /v1/chat/completions request in flight (server-internal): submits its
// prompts to the engine, relays the engine's chunks to the client as SSE events or one JSON body,
// aborts the engine work when the client disconnects or --request-timeout passes, records the
// request's metrics and writes its log line.
//
// Back-pressure: a stream never queues more than about --stream-buffer-size bytes in the server.
// When the connection's queue reaches it (the client reads slower than the engine writes), the
// request is paused in the engine (EngineClient::pause: not scheduled, KV kept while nobody needs
// it) and chunks already made wait here; it resumes when the queue drains to a quarter. Paused
// longer than --stream-stall-timeout, it is aborted (its KV freed) and the connection closed.
//
// Lives on the loop thread; the engine's notify callback only posts a pump to the loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine_types.h"
#include "net/http_server.h"
#include "server/response_assembler.h"
#include "server/server_state.h"

namespace strata::server {

class Generation : public std::enable_shared_from_this<Generation> {
 public:
  // Validates against the engine and starts the request; errors are answered on `writer`.
  // `arrival` is the now_seconds() time the HTTP request was complete.
  static void start(ServerState* state, GenerationRequest request, net::ResponseWriter writer,
                    double arrival);
  ~Generation();

 private:
  struct ChoiceTiming {
    double first_token = -1;
    double last_token = -1;
  };
  Generation(ServerState* state, GenerationRequest request, net::ResponseWriter writer,
             double arrival);
  bool submit();
  void schedule_pump();
  void pump();
  void handle_chunk(int prompt_index, engine::OutputChunk& chunk, std::string* out);
  void complete();
  void fail(const ApiError& error);
  void abort_engine();
  void on_disconnect();
  void on_timeout();
  // Back-pressure (streams only).
  bool holding_back(size_t pending_bytes) const;
  void pause();
  void resume();
  void set_paused(bool paused);
  void on_stall();
  void log_request() const;

  ServerState* state_;
  GenerationRequest request_;
  net::ResponseWriter writer_;
  double arrival_;
  std::string id_;
  std::unique_ptr<ResponseAssembler> assembler_;
  std::vector<std::shared_ptr<engine::RequestStream>> streams_;
  std::vector<std::string> engine_ids_;
  std::vector<bool> stream_done_;
  // Chunks taken from the engine but not yet handled: (prompt index, chunk). Only a paused stream
  // leaves any here.
  std::deque<std::pair<int, engine::OutputChunk>> backlog_;
  bool paused_ = false;
  net::EventLoop::TimerId stall_timer_ = 0;
  std::vector<ChoiceTiming> timing_;
  std::vector<std::string> finish_reasons_;
  std::shared_ptr<std::atomic<bool>> pump_scheduled_ = std::make_shared<std::atomic<bool>>(false);
  bool responded_ = false;  // the response (or its end) has been sent
  bool disconnected_ = false;
  bool finished_ = false;  // every stream is done
  net::EventLoop::TimerId timeout_timer_ = 0;
};

}  // namespace strata::server
