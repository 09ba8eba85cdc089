#include "engine/step_trace.h"

#include <cerrno>
#include <cstring>

#include "core/logging.h"

namespace strata::engine {
namespace {

void append_number(std::string& s, double v) {
  char buf[40];
  // Nine decimals: nanoseconds for the engine clock and the phases.
  const int n = std::snprintf(buf, sizeof(buf), "%.9f", v);
  s.append(buf, static_cast<size_t>(n));
}

void append_int(std::string& s, int64_t v) {
  s += std::to_string(v);
}

// A JSON string literal (request ids come from users).
void append_string(std::string& s, const std::string& v) {
  s += '"';
  for (const char ch : v) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      s += '\\';
      s += ch;
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      s += buf;
    } else {
      s += ch;  // UTF-8 bytes pass through
    }
  }
  s += '"';
}

}  // namespace

Result<std::unique_ptr<StepTraceWriter>> StepTraceWriter::open(const std::string& path,
                                                               int flush_every) {
  std::FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr)
    return invalid_argument("--step-trace: cannot open " + path +
                            " for appending: " + std::strerror(errno));
  std::unique_ptr<StepTraceWriter> w(new StepTraceWriter());
  w->path_ = path;
  w->file_ = f;
  w->flush_every_ = flush_every < 1 ? 1 : flush_every;
  std::setvbuf(f, nullptr, _IOFBF, 1 << 16);
  return w;
}

StepTraceWriter::~StepTraceWriter() {
  if (file_ != nullptr) {
    flush();
    std::fclose(file_);
  }
}

void StepTraceWriter::write(const StepTraceRecord& r) {
  std::string& s = line_;
  s.clear();
  s += "{\"step\": ";
  append_int(s, r.step);
  s += ", \"t\": ";
  append_number(s, r.start);
  s += ", \"dur\": ";
  append_number(s, r.duration);
  s += ", \"phases\": {\"wait\": ";
  append_number(s, r.wait);
  s += ", \"between\": ";
  append_number(s, r.between);
  s += ", \"schedule\": ";
  append_number(s, r.schedule);
  s += ", \"prepare\": ";
  append_number(s, r.prepare);
  s += ", \"forward\": ";
  append_number(s, r.forward);
  s += ", \"sample\": ";
  append_number(s, r.sample);
  s += ", \"output\": ";
  append_number(s, r.output);
  s += "}";
  if (r.comm > 0) {
    s += ", \"comm\": ";
    append_number(s, r.comm);
  }
  s += ", \"running\": ";
  append_int(s, r.running);
  s += ", \"waiting\": ";
  append_int(s, r.waiting);
  s += ", \"prefill_requests\": ";
  append_int(s, r.prefill_requests);
  s += ", \"prefill_tokens\": ";
  append_int(s, r.prefill_tokens);
  s += ", \"decode_tokens\": ";
  append_int(s, r.decode_tokens);
  s += ", \"events\": [";
  for (size_t i = 0; i < r.events.size(); ++i) {
    const StepTraceEvent& e = r.events[i];
    if (i > 0) s += ", ";
    s += "{\"id\": ";
    append_string(s, e.request_id);
    if (e.choice >= 0) {
      s += ", \"choice\": ";
      append_int(s, e.choice);
    }
    s += ", \"tokens\": ";
    append_int(s, e.tokens);
    if (e.tokens > 0) {
      s += ", \"context\": ";
      append_int(s, e.context);
      if (e.sample) s += ", \"sample\": true";
    }
    if (e.prefill) s += ", \"prefill\": true";
    if (e.first_scheduled) {
      s += ", \"first_scheduled\": true, \"arrival\": ";
      append_number(s, e.arrival);
    }
    if (e.first_token) s += ", \"first_token\": true";
    s += '}';
  }
  s += "]}\n";
  if (std::fwrite(s.data(), 1, s.size(), file_) != s.size() && !failed_) {
    failed_ = true;
    STRATA_LOG(ERROR) << "--step-trace: writing " << path_ << " failed: " << std::strerror(errno);
  }
  if (++unflushed_ >= flush_every_) flush();
}

void StepTraceWriter::flush() {
  unflushed_ = 0;
  if (std::fflush(file_) != 0 && !failed_) {
    failed_ = true;
    STRATA_LOG(ERROR) << "--step-trace: writing " << path_ << " failed: " << std::strerror(errno);
  }
}

}  // namespace strata::engine
