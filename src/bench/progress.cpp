#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace strata::bench {

namespace {
constexpr double kRateWindow = 2.0;  // seconds of history for "current" tokens/s

std::string clock_text(double seconds) {
  int s = static_cast<int>(seconds);
  char buf[32];
  if (s >= 3600) {
    snprintf(buf, sizeof(buf), "%d:%02d:%02d", s / 3600, (s / 60) % 60, s % 60);
  } else {
    snprintf(buf, sizeof(buf), "%02d:%02d", s / 60, s % 60);
  }
  return buf;
}
}  // namespace

ProgressMode choose_progress_mode(FILE* out, bool disabled) {
  if (disabled) return ProgressMode::kOff;
  return ::isatty(::fileno(out)) ? ProgressMode::kBar : ProgressMode::kLines;
}

Progress::Progress(ProgressMode mode, int64_t total, FILE* out, double interval_s)
    : mode_(mode), total_(total), out_(out), interval_s_(interval_s > 0 ? interval_s : 5.0) {}

void Progress::start(double now) {
  start_ = now;
  history_.clear();
  history_.emplace_back(now, 0);
}

void Progress::request_done(bool success) {
  done_++;
  if (!success) failed_++;
}

double Progress::current_rate(double now) {
  history_.emplace_back(now, tokens_);
  while (history_.size() > 2 && history_[1].first <= now - kRateWindow) history_.pop_front();
  const auto& [t0, n0] = history_.front();
  double dt = now - t0;
  return dt > 1e-6 ? static_cast<double>(tokens_ - n0) / dt : 0.0;
}

std::string Progress::render(double now) {
  double rate = current_rate(now);
  double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  char buf[256];
  std::string failed = failed_ > 0 ? ", " + std::to_string(failed_) + " failed" : "";
  if (mode_ == ProgressMode::kBar) {
    const int kWidth = 30;
    int filled = static_cast<int>(std::floor(frac * kWidth));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    snprintf(buf, sizeof(buf), "%3d%% |%s| %lld/%lld [%s elapsed, %.1f tok/s%s]",
             static_cast<int>(frac * 100), bar.c_str(), static_cast<long long>(done_),
             static_cast<long long>(total_), clock_text(now - start_).c_str(), rate,
             failed.c_str());
  } else {
    snprintf(buf, sizeof(buf),
             "Progress: %lld/%lld requests done (%d%%), %.1f s elapsed, %.1f output tok/s%s",
             static_cast<long long>(done_), static_cast<long long>(total_),
             static_cast<int>(frac * 100), now - start_, rate, failed.c_str());
  }
  return buf;
}

void Progress::tick(double now) {
  if (mode_ == ProgressMode::kOff) return;
  std::string line = render(now);
  if (mode_ == ProgressMode::kBar) {
    fprintf(out_, "\r%s\x1b[K", line.c_str());
  } else {
    fprintf(out_, "%s\n", line.c_str());
  }
  fflush(out_);
}

void Progress::finish(double now) {
  if (mode_ == ProgressMode::kOff) return;
  tick(now);
  if (mode_ == ProgressMode::kBar) {
    fprintf(out_, "\n");
    fflush(out_);
  }
}

}  // namespace strata::bench
