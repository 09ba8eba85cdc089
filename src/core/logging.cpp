#include "core/logging.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace strata {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("STRATA_LOG_LEVEL");
  LogLevel level = LogLevel::kInfo;
  if (env != nullptr) parse_log_level(env, &level);
  return level;
}

std::atomic<int>& level_ref() {
  static std::atomic<int> level{static_cast<int>(initial_level())};
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "DEBUG";
    case LogLevel::kInfo:
      return "INFO";
    case LogLevel::kWarning:
      return "WARNING";
    case LogLevel::kError:
      return "ERROR";
    case LogLevel::kFatal:
      return "FATAL";
  }
  return "?";
}

}  // namespace

void set_log_level(LogLevel level) {
  level_ref().store(static_cast<int>(level));
}
LogLevel log_level() {
  return static_cast<LogLevel>(level_ref().load());
}
bool log_enabled(LogLevel level) {
  return static_cast<int>(level) >= level_ref().load();
}

bool parse_log_level(const std::string& text, LogLevel* out) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "debug")
    *out = LogLevel::kDebug;
  else if (t == "info")
    *out = LogLevel::kInfo;
  else if (t == "warning" || t == "warn")
    *out = LogLevel::kWarning;
  else if (t == "error")
    *out = LogLevel::kError;
  else
    return false;
  return true;
}

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%m-%d %H:%M:%S", &tm);
  const char* base = std::strrchr(file, '/');
  stream_ << level_name(level) << ' ' << buf << " [" << (base ? base + 1 : file) << ':' << line
          << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string s = stream_.str();
  // One write() per line: atomic with respect to other threads' lines.
  ssize_t unused = ::write(STDERR_FILENO, s.data(), s.size());
  (void)unused;
  if (level_ == LogLevel::kFatal) std::abort();
}

}  // namespace strata
