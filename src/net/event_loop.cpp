#include "net/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>

#include "core/check.h"
#include "core/clock.h"
#include "net/socket.h"

namespace strata::net {

namespace {
constexpr uint64_t kWakeId = 1;
constexpr uint64_t kTimerId = 2;
}  // namespace

Result<std::unique_ptr<EventLoop>> EventLoop::create() {
  std::unique_ptr<EventLoop> loop(new EventLoop());
  loop->owner_ = std::this_thread::get_id();
  loop->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  loop->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  loop->timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (loop->epoll_fd_ < 0 || loop->wake_fd_ < 0 || loop->timer_fd_ < 0) {
    return resource_exhausted("cannot create the event loop: " + errno_text(errno) +
                              " (too many open files? raise `ulimit -n`)");
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeId;
  ::epoll_ctl(loop->epoll_fd_, EPOLL_CTL_ADD, loop->wake_fd_, &ev);
  ev.data.u64 = kTimerId;
  ::epoll_ctl(loop->epoll_fd_, EPOLL_CTL_ADD, loop->timer_fd_, &ev);
  return loop;
}

EventLoop::~EventLoop() {
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (timer_fd_ >= 0) ::close(timer_fd_);
}

void EventLoop::stop() {
  stop_.store(true);
  uint64_t one = 1;
  ssize_t rc = ::write(wake_fd_, &one, sizeof(one));
  (void)rc;
}

void EventLoop::post(Callback fn) {
  bool was_empty;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    was_empty = posted_.empty();
    posted_.push_back(std::move(fn));
  }
  if (was_empty) {
    uint64_t one = 1;
    ssize_t rc = ::write(wake_fd_, &one, sizeof(one));
    (void)rc;
  }
}

void EventLoop::drain_posted() {
  uint64_t value;
  while (::read(wake_fd_, &value, sizeof(value)) > 0) {
  }
  std::vector<Callback> batch;
  {
    std::lock_guard<std::mutex> lock(post_mu_);
    batch.swap(posted_);
  }
  for (auto& fn : batch) fn();
}

EventLoop::WatchId EventLoop::watch(int fd, uint32_t events, IoCallback cb) {
  STRATA_DCHECK(in_loop_thread());
  WatchId id = next_id_++;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) return 0;
  watches_.emplace(id, std::make_shared<Watch>(Watch{fd, std::move(cb)}));
  return id;
}

void EventLoop::modify(WatchId id, uint32_t events) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = id;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, it->second->fd, &ev);
}

void EventLoop::unwatch(WatchId id) {
  auto it = watches_.find(id);
  if (it == watches_.end()) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second->fd, nullptr);
  watches_.erase(it);
}

EventLoop::TimerId EventLoop::run_after(double delay_s, Callback fn) {
  return run_at(now_seconds() + std::max(0.0, delay_s), std::move(fn));
}

EventLoop::TimerId EventLoop::run_at(double deadline, Callback fn) {
  STRATA_DCHECK(in_loop_thread());
  TimerId id = next_id_++;
  timers_.emplace(id, std::move(fn));
  timer_heap_.push({deadline, id});
  arm_timerfd();
  return id;
}

void EventLoop::cancel(TimerId id) {
  timers_.erase(id);
}

void EventLoop::arm_timerfd() {
  while (!timer_heap_.empty() && timers_.count(timer_heap_.top().id) == 0) timer_heap_.pop();
  double deadline = timer_heap_.empty() ? -1 : timer_heap_.top().deadline;
  if (deadline == armed_deadline_) return;
  armed_deadline_ = deadline;
  itimerspec spec{};
  if (deadline >= 0) {
    // steady_clock is CLOCK_MONOTONIC on Linux, so now_seconds() deadlines map directly.
    double d = std::max(deadline, 1e-6);
    spec.it_value.tv_sec = static_cast<time_t>(d);
    spec.it_value.tv_nsec = static_cast<long>((d - std::floor(d)) * 1e9);
    if (spec.it_value.tv_sec == 0 && spec.it_value.tv_nsec == 0) spec.it_value.tv_nsec = 1;
  }
  ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void EventLoop::run_timers() {
  uint64_t expirations;
  while (::read(timer_fd_, &expirations, sizeof(expirations)) > 0) {
  }
  armed_deadline_ = -1;
  double now = now_seconds();
  while (!timer_heap_.empty() && timer_heap_.top().deadline <= now) {
    TimerId id = timer_heap_.top().id;
    timer_heap_.pop();
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    Callback fn = std::move(it->second);
    timers_.erase(it);
    fn();
  }
  arm_timerfd();
}

void EventLoop::run() {
  owner_ = std::this_thread::get_id();
  std::vector<epoll_event> events(256);
  // Timers added before run() are armed already; posted work is picked up through the eventfd.
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      STRATA_LOG(ERROR) << "epoll_wait failed: " << errno_text(errno);
      break;
    }
    bool timers_due = false;
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) {
        drain_posted();
      } else if (id == kTimerId) {
        timers_due = true;
      } else {
        auto it = watches_.find(id);
        if (it == watches_.end()) continue;
        std::shared_ptr<Watch> w = it->second;
        w->cb(events[i].events);
      }
    }
    if (timers_due) run_timers();
    if (n == static_cast<int>(events.size()) && events.size() < 4096)
      events.resize(events.size() * 2);
  }
  stop_.store(false);  // a later run() starts afresh
}

}  // namespace strata::net
