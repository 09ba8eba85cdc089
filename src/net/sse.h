// Server-sent events (text/event-stream): an incremental parser for clients and a formatter for
// servers. Lines end in CRLF, LF or CR; a blank line dispatches the event; lines starting with
// ':' are comments (keep-alive pings) and are skipped.
#pragma once

#include <string>
#include <string_view>

#include "core/function_ref.h"

namespace strata::net {

struct SseEvent {
  std::string event;  // "event:" field; empty for the default "message"
  std::string data;   // "data:" lines joined by '\n'
  std::string id;     // "id:" field
};

class SseParser {
 public:
  // Parses `bytes` (any split) and calls on_event for each complete event.
  void feed(std::string_view bytes, FunctionRef<void(const SseEvent&)> on_event);
  // End of stream: dispatches a final event that lacked its blank line.
  void finish(FunctionRef<void(const SseEvent&)> on_event);
  void reset();

 private:
  void process_line(std::string_view line, FunctionRef<void(const SseEvent&)> on_event);
  void dispatch(FunctionRef<void(const SseEvent&)> on_event);

  std::string line_;
  bool skip_lf_ = false;  // the previous chunk ended in CR
  bool has_data_ = false;
  SseEvent pending_;
};

// "data: <payload>\n\n" (multi-line payloads become several data: lines); with an event name,
// "event: <name>\n" comes first.
std::string sse_format(std::string_view data, std::string_view event = {});

}  // namespace strata::net
