// Internal to HttpServer: one accepted connection and the exchange (request/response pair) in
// progress on it. Everything here runs on the loop thread; ResponseWriter posts onto it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "net/event_loop.h"
#include "net/http_message.h"
#include "net/http_parser.h"

namespace strata::net {
class HttpServer;
}

namespace strata::net::detail {

class Connection;

struct Exchange {
  std::shared_ptr<Connection> conn;
  EventLoop* loop = nullptr;
  uint64_t seq = 0;
  std::atomic<bool> finished{false};  // response complete, aborted or connection closed
  bool disconnected = false;          // loop thread: closed before the response completed
  // Loop thread only.
  std::function<void()> on_disconnect;
  std::function<void()> on_drain;
  ~Exchange();  // an unfinished exchange with no writer left is answered (500) or closed
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer* server, EventLoop* loop, int fd);
  ~Connection();
  void start();

  // Exchange operations; ignored unless `seq` is the exchange in progress.
  void send_response(uint64_t seq, HttpResponse response);
  void start_stream(uint64_t seq, int status, HttpHeaders headers);
  void write_chunk(uint64_t seq, std::string data);
  void end_stream(uint64_t seq);
  void abort(uint64_t seq);
  void abandon(uint64_t seq);
  void set_on_disconnect(const std::shared_ptr<Exchange>& ex, std::function<void()> cb);

  // Closes the connection; an exchange in progress sees on_disconnect.
  void close_connection();
  // Answers `status` (with Retry-After for 503) at once, before any request, and closes.
  void reject(int status, const std::string& message) { send_error(status, message); }
  void detach_server() {
    set_buffered(0);
    server_ = nullptr;
  }
  // No request in progress and nothing buffered: safe to close during shutdown.
  bool idle() const { return state_ == State::kReading && !request_started_ && in_.empty(); }

  bool closed() const { return closed_.load(); }
  size_t buffered() const { return buffered_.load(); }
  size_t high_watermark() const { return high_watermark_; }

 private:
  enum class State { kReading, kHandling, kStreaming, kClosing, kClosed };
  void on_events(uint32_t events);
  void do_read();
  void process_input();
  void dispatch();
  void send_error(int status, const std::string& message);
  void finish_exchange();
  // Output is flushed in kClosing: send FIN, drain the client's input briefly, then close (a
  // plain close with unread input would reset the connection and lose the response).
  void finish_closing();
  void queue(std::string_view data);
  // Sets buffered_ and keeps the server's total in step.
  void set_buffered(size_t bytes);
  void flush();
  void update_interest();
  void arm_timer(double seconds);
  void on_timer();
  bool live(uint64_t seq) const { return exchange_open_ && seq == seq_; }

  HttpServer* server_;
  EventLoop* loop_;
  int fd_;
  EventLoop::WatchId watch_ = 0;
  EventLoop::TimerId timer_ = 0;
  State state_ = State::kReading;
  HttpRequestParser parser_;
  std::string in_;
  std::string out_;
  size_t out_off_ = 0;
  bool want_write_ = false;
  bool read_paused_ = false;
  bool request_started_ = false;
  bool continue_sent_ = false;
  bool keep_alive_ = true;
  bool chunked_ = false;
  bool head_request_ = false;
  int version_minor_ = 1;
  bool exchange_open_ = false;
  uint64_t seq_ = 0;
  std::weak_ptr<Exchange> current_;
  bool above_high_ = false;
  bool shut_wr_ = false;
  size_t high_watermark_;
  std::atomic<bool> closed_{false};
  std::atomic<size_t> buffered_{0};
};

}  // namespace strata::net::detail
