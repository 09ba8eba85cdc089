// An injectable clock for request timestamps, so that a simulator or a test can drive time.
#pragma once

#include "core/clock.h"

namespace strata::sched {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual double now() const = 0;  // seconds, monotonic
};

// Monotonic wall time (core/clock.h).
class SteadyClock final : public Clock {
 public:
  double now() const override { return now_seconds(); }
  static const SteadyClock& instance() {
    static const SteadyClock clock;
    return clock;
  }
};

// Time that moves only when told to.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(double start = 0.0) : t_(start) {}
  double now() const override { return t_; }
  void set(double t) { t_ = t; }
  void advance(double dt) { t_ += dt; }

 private:
  double t_;
};

}  // namespace strata::sched
