// A few threads that run posted tasks in order of posting (server-internal): the server's request
// parsing, chat templates and tokenization run here, off the event-loop thread, so a huge request
// never holds up other connections, /health or /metrics.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::server {

class WorkQueue {
 public:
  explicit WorkQueue(int num_threads);
  // Drops the tasks not started, waits for the running ones.
  ~WorkQueue();
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Thread-safe. `task` runs on one of the threads, after every task posted before it started.
  void post(std::function<void()> task);
  int num_threads() const { return static_cast<int>(threads_.size()); }
  // Tasks waiting or running (a snapshot).
  size_t size() const;

 private:
  void run();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace strata::server
