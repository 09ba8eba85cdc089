#include "net/loop_thread.h"

#include <future>

namespace strata::net {

Result<std::unique_ptr<LoopThread>> LoopThread::start() {
  auto loop = EventLoop::create();
  if (!loop.ok()) return loop.status();
  std::unique_ptr<LoopThread> t(new LoopThread());
  t->loop_ = std::move(loop).value();
  EventLoop* l = t->loop_.get();
  std::promise<void> started;
  auto fut = started.get_future();
  t->thread_ = std::thread([l, &started] {
    // run() takes ownership of the loop for this thread before anything is posted to it.
    l->post([&started] { started.set_value(); });
    l->run();
  });
  fut.wait();
  return t;
}

LoopThread::~LoopThread() {
  stop();
}

void LoopThread::call(const std::function<void()>& fn) {
  if (loop_->in_loop_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  loop_->post([&] {
    fn();
    done.set_value();
  });
  fut.wait();
}

void LoopThread::stop() {
  if (!thread_.joinable()) return;
  loop_->stop();
  thread_.join();
}

}  // namespace strata::net
