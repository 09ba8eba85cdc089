// An EventLoop running on its own thread, for servers whose I/O lives beside other work (the
// engine thread, tests). Destruction stops the loop and joins the thread.
#pragma once

#include <functional>
#include <memory>
#include <thread>

#include "core/status.h"
#include "net/event_loop.h"

namespace strata::net {

class LoopThread {
 public:
  // Creates the loop and starts the thread.
  static Result<std::unique_ptr<LoopThread>> start();
  ~LoopThread();  // stop() + join
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;

  EventLoop* loop() { return loop_.get(); }
  // Runs `fn` on the loop thread and waits for it to return.
  void call(const std::function<void()>& fn);
  // Stops the loop and joins the thread (idempotent).
  void stop();

 private:
  LoopThread() = default;
  std::unique_ptr<EventLoop> loop_;
  std::thread thread_;
};

}  // namespace strata::net
