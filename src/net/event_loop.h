// A single-threaded epoll event loop: file-descriptor watches, timers (timerfd, microsecond
// precision) and a thread-safe post() queue woken through an eventfd. Everything except post()
// and stop() must be called on the loop thread (the thread that created the loop, or the one
// inside run()).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace strata::net {

class EventLoop {
 public:
  using Callback = std::function<void()>;
  // Receives the epoll event bits (EPOLLIN, EPOLLOUT, EPOLLERR, EPOLLHUP, EPOLLRDHUP).
  using IoCallback = std::function<void(uint32_t events)>;
  using WatchId = uint64_t;
  using TimerId = uint64_t;

  // Fails when the process is out of file descriptors.
  static Result<std::unique_ptr<EventLoop>> create();
  ~EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Runs until stop(). Posted callbacks, timers and I/O callbacks all run on this thread.
  void run();
  // Thread-safe: run() returns after the current iteration.
  void stop();
  // Thread-safe: runs `fn` on the loop thread, in the order posted.
  void post(Callback fn);
  bool in_loop_thread() const { return std::this_thread::get_id() == owner_.load(); }

  // Watches `fd` (not owned, never closed here) for `events` (EPOLLIN | EPOLLOUT | ...).
  // Returns 0 and leaves nothing registered when epoll refuses the descriptor.
  WatchId watch(int fd, uint32_t events, IoCallback cb);
  void modify(WatchId id, uint32_t events);
  // Stops watching; safe to call from inside the watch's own callback.
  void unwatch(WatchId id);

  // Runs `fn` once after `delay_s` seconds (or at the now_seconds() time `deadline`).
  TimerId run_after(double delay_s, Callback fn);
  TimerId run_at(double deadline, Callback fn);
  // Cancels a pending timer; unknown or already-run ids are ignored.
  void cancel(TimerId id);

  size_t num_watches() const { return watches_.size(); }

 private:
  EventLoop() = default;
  struct Watch {
    int fd;
    IoCallback cb;
  };
  struct TimerEntry {
    double deadline;
    TimerId id;
    bool operator>(const TimerEntry& o) const {
      return deadline != o.deadline ? deadline > o.deadline : id > o.id;
    }
  };
  void drain_posted();
  void run_timers();
  void arm_timerfd();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int timer_fd_ = -1;
  std::atomic<std::thread::id> owner_;
  std::atomic<bool> stop_{false};

  std::mutex post_mu_;
  std::vector<Callback> posted_;

  uint64_t next_id_ = 16;  // ids below 16 are reserved for the loop's own descriptors
  // shared_ptr so a callback that unwatches itself stays alive until it returns.
  std::unordered_map<WatchId, std::shared_ptr<Watch>> watches_;

  std::priority_queue<TimerEntry, std::vector<TimerEntry>, std::greater<>> timer_heap_;
  std::unordered_map<TimerId, Callback> timers_;
  double armed_deadline_ = -1;
};

}  // namespace strata::net
