// Incremental HTTP/1.x parsers for requests (server side) and responses (client side). Bytes may
// arrive in any split; feed() consumes what belongs to the current message and stops at its end
// (the rest is the next message's). Malformed input never crashes: the parser moves to an error
// state with the HTTP status a server should answer (400, 413, 431, 501, 505) and a message.
//
// Accepted: CRLF or bare LF line ends, Content-Length bodies, chunked bodies (extensions ignored,
// trailers parsed and dropped), HTTP/1.0 and HTTP/1.1. Rejected: obsolete line folding, both
// Content-Length and Transfer-Encoding, differing Content-Length values, transfer codings other
// than chunked, bytes outside the header grammar, heads or bodies over the limits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "net/http_message.h"

namespace strata::net {

struct HttpLimits {
  size_t max_header_bytes = 64 * 1024;  // start line + header fields + blank line
  size_t max_headers = 128;             // number of header fields
  size_t max_body_bytes = 32u << 20;    // decoded body
};

// Decodes a message body framed by Content-Length, chunked coding or the end of the connection.
class BodyDecoder {
 public:
  enum class Mode { kNone, kLength, kChunked, kUntilClose };
  void start(Mode mode, uint64_t length, size_t max_body_bytes);
  // Consumes bytes of `data` and appends decoded body bytes to *out; returns bytes consumed.
  size_t feed(std::string_view data, std::string* out);
  // The peer closed the connection: completes an until-close body, else an error.
  void on_eof();
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  bool too_large() const { return too_large_; }
  const std::string& error() const { return error_; }
  uint64_t decoded_bytes() const { return decoded_; }

 private:
  enum class State { kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailer, kDone, kError };
  void fail(std::string message, bool too_large = false);
  bool take_line(std::string_view data, size_t* pos, std::string_view* line, bool* complete);

  Mode mode_ = Mode::kNone;
  State state_ = State::kDone;
  uint64_t remaining_ = 0;
  uint64_t decoded_ = 0;
  size_t max_body_ = 0;
  std::string line_;  // partial chunk-size / trailer line
  size_t trailer_bytes_ = 0;
  bool too_large_ = false;
  std::string error_;
};

class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpLimits limits = {}) : limits_(limits) {}
  // Consumes bytes of the current request; returns how many were used. Call again with the rest
  // after reset() for the next request on the connection.
  size_t feed(std::string_view data);
  bool headers_complete() const { return head_done_; }
  bool complete() const { return complete_; }
  bool failed() const { return error_status_ != 0; }
  // The status to answer with on failure (400, 413, 431, 501, 505) and a human-readable reason.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  // True when the client asked for "Expect: 100-continue" (valid once headers_complete()).
  bool expects_continue() const { return expects_continue_; }
  HttpRequest& request() { return request_; }
  void reset();

 private:
  void fail(int status, std::string message);
  void parse_head();

  HttpLimits limits_;
  std::string head_;
  size_t scan_from_ = 0;
  bool head_done_ = false;
  bool complete_ = false;
  bool expects_continue_ = false;
  int error_status_ = 0;
  std::string error_message_;
  BodyDecoder body_;
  HttpRequest request_;
};

class HttpResponseParser {
 public:
  explicit HttpResponseParser(HttpLimits limits = {}) : limits_(limits) {}
  // Responses to HEAD carry no body.
  void set_head_request(bool is_head) { head_request_ = is_head; }
  // Consumes bytes of the current response and appends decoded body bytes to *body.
  size_t feed(std::string_view data, std::string* body);
  // The peer closed the connection.
  void on_eof();
  bool headers_complete() const { return head_done_; }
  bool complete() const { return complete_; }
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }
  int version_minor() const { return version_minor_; }
  const HttpHeaders& headers() const { return headers_; }
  // False when the server will close the connection after this response.
  bool keep_alive() const { return keep_alive_; }
  void reset();

 private:
  void fail(std::string message);
  void parse_head();

  HttpLimits limits_;
  bool head_request_ = false;
  std::string head_;
  size_t scan_from_ = 0;
  bool head_done_ = false;
  bool complete_ = false;
  bool keep_alive_ = true;
  int status_ = 0;
  int version_minor_ = 1;
  std::string reason_;
  std::string error_;
  HttpHeaders headers_;
  BodyDecoder body_;
};

// Splits "a/b?c" into path "a/b" and query "c".
void split_target(std::string_view target, std::string* path, std::string* query);

}  // namespace strata::net
