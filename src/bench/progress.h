// Live progress for a benchmark run: on a terminal a bar redrawn in place (requests done /
// total, elapsed time, current output tokens/s); otherwise one plain line every few seconds.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <utility>

namespace strata::bench {

enum class ProgressMode { kOff, kBar, kLines };

class Progress {
 public:
  // `out` is not owned. `interval_s` spaces the plain lines (the bar redraws every 0.1 s).
  Progress(ProgressMode mode, int64_t total, FILE* out, double interval_s = 5.0);
  ProgressMode mode() const { return mode_; }
  // Seconds between tick() calls the runner should schedule.
  double tick_interval() const { return mode_ == ProgressMode::kBar ? 0.1 : interval_s_; }

  void start(double now);
  void add_tokens(int64_t n) { tokens_ += n; }
  void request_done(bool success);
  // Redraws the bar or prints a line.
  void tick(double now);
  // Final redraw; ends the bar's line.
  void finish(double now);

  // The text of one update, without line control characters (for tests).
  std::string render(double now);

 private:
  double current_rate(double now);

  ProgressMode mode_;
  int64_t total_;
  FILE* out_;
  double interval_s_;
  double start_ = 0;
  int64_t done_ = 0;
  int64_t failed_ = 0;
  int64_t tokens_ = 0;
  std::deque<std::pair<double, int64_t>> history_;  // (time, tokens) for the recent rate
};

// kBar when `out` is a terminal, kLines otherwise; kOff when disabled.
ProgressMode choose_progress_mode(FILE* out, bool disabled);

}  // namespace strata::bench
