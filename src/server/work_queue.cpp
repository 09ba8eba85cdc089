#include "server/work_queue.h"

#include <algorithm>

namespace strata::server {

WorkQueue::WorkQueue(int num_threads) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { run(); });
}

WorkQueue::~WorkQueue() {
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    dropped.swap(tasks_);
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  dropped.clear();  // outside the lock: a task's captures may do anything when destroyed
}

void WorkQueue::post(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

size_t WorkQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tasks_.size() + running_;
}

void WorkQueue::run() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
}

}  // namespace strata::server
