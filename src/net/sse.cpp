#include "net/sse.h"

namespace strata::net {

void SseParser::reset() {
  line_.clear();
  skip_lf_ = false;
  has_data_ = false;
  pending_ = SseEvent();
}

void SseParser::feed(std::string_view bytes, FunctionRef<void(const SseEvent&)> on_event) {
  size_t pos = 0;
  if (skip_lf_ && !bytes.empty()) {
    if (bytes[0] == '\n') pos = 1;
    skip_lf_ = false;
  }
  while (pos < bytes.size()) {
    size_t end = bytes.find_first_of("\r\n", pos);
    if (end == std::string_view::npos) {
      line_.append(bytes.substr(pos));
      return;
    }
    std::string_view line;
    if (line_.empty()) {
      line = bytes.substr(pos, end - pos);
    } else {
      line_.append(bytes.substr(pos, end - pos));
      line = line_;
    }
    bool cr = bytes[end] == '\r';
    pos = end + 1;
    if (cr) {
      if (pos < bytes.size()) {
        if (bytes[pos] == '\n') ++pos;
      } else {
        skip_lf_ = true;
      }
    }
    process_line(line, on_event);
    line_.clear();
  }
}

void SseParser::finish(FunctionRef<void(const SseEvent&)> on_event) {
  if (!line_.empty()) {
    std::string last = std::move(line_);
    line_.clear();
    process_line(last, on_event);
  }
  dispatch(on_event);
}

void SseParser::process_line(std::string_view line, FunctionRef<void(const SseEvent&)> on_event) {
  if (line.empty()) {
    dispatch(on_event);
    return;
  }
  if (line.front() == ':') return;
  size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) pending_.data += '\n';
    pending_.data.append(value);
    has_data_ = true;
  } else if (field == "event") {
    pending_.event = std::string(value);
  } else if (field == "id") {
    pending_.id = std::string(value);
  }
}

void SseParser::dispatch(FunctionRef<void(const SseEvent&)> on_event) {
  if (has_data_) on_event(pending_);
  has_data_ = false;
  pending_.data.clear();
  pending_.event.clear();
}

std::string sse_format(std::string_view data, std::string_view event) {
  std::string out;
  out.reserve(data.size() + 16);
  if (!event.empty()) {
    out += "event: ";
    out += event;
    out += '\n';
  }
  size_t pos = 0;
  while (true) {
    size_t nl = data.find('\n', pos);
    out += "data: ";
    out.append(data.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos));
    out += '\n';
    if (nl == std::string_view::npos) break;
    pos = nl + 1;
  }
  out += '\n';
  return out;
}

}  // namespace strata::net
