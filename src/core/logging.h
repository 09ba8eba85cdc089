// Logging in vLLM's layout: "INFO 12-02 16:23:28 [file.cpp:42] message", one write per line so
// lines from different threads never interleave. Level from STRATA_LOG_LEVEL (DEBUG, INFO,
// WARNING, ERROR; default INFO) or set_log_level().
#pragma once

#include <sstream>
#include <string>

namespace strata {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kFatal = 4 };

void set_log_level(LogLevel level);
LogLevel log_level();
bool log_enabled(LogLevel level);
// Parses "debug"/"info"/"warning"/"error" (any case); returns false when unknown.
bool parse_log_level(const std::string& text, LogLevel* out);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();  // writes the line; aborts for kFatal
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};

// Swallows a stream expression when the level is disabled.
struct LogVoidify {
  void operator&(std::ostream&) {}
};

}  // namespace strata

#define STRATA_LOG_LEVEL_DEBUG ::strata::LogLevel::kDebug
#define STRATA_LOG_LEVEL_INFO ::strata::LogLevel::kInfo
#define STRATA_LOG_LEVEL_WARNING ::strata::LogLevel::kWarning
#define STRATA_LOG_LEVEL_ERROR ::strata::LogLevel::kError
#define STRATA_LOG_LEVEL_FATAL ::strata::LogLevel::kFatal

// STRATA_LOG(INFO) << "loaded " << n << " tensors";
#define STRATA_LOG(level)                          \
  !::strata::log_enabled(STRATA_LOG_LEVEL_##level) \
      ? (void)0                                    \
      : ::strata::LogVoidify() &                   \
            ::strata::LogMessage(STRATA_LOG_LEVEL_##level, __FILE__, __LINE__).stream()
