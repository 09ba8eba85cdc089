#include "net/http_parser.h"

#include <algorithm>

namespace strata::net {

namespace {

constexpr size_t kMaxChunkLine = 4096;
constexpr size_t kMaxTrailerBytes = 16 * 1024;

bool is_tchar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!is_tchar(c)) return false;
  }
  return true;
}

// Field values: visible ASCII, space, tab and obs-text; no other controls.
bool is_field_value(std::string_view s) {
  for (unsigned char c : s) {
    if (c == '\t') continue;
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Finds the end (one past the blank line) of a head in `buf`, scanning from `from`.
size_t find_head_end(const std::string& buf, size_t from) {
  for (size_t i = from; i < buf.size(); ++i) {
    if (buf[i] != '\n') continue;
    if (i + 1 < buf.size() && buf[i + 1] == '\n') return i + 2;
    if (i + 2 < buf.size() && buf[i + 1] == '\r' && buf[i + 2] == '\n') return i + 3;
  }
  return std::string::npos;
}

// Splits a head into lines without their line ends. Returns false on a bare CR inside a line.
bool split_lines(std::string_view head, std::vector<std::string_view>* lines) {
  while (!head.empty()) {
    size_t nl = head.find('\n');
    std::string_view line = head.substr(0, nl);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return false;
    lines->push_back(line);
    if (nl == std::string_view::npos) break;
    head.remove_prefix(nl + 1);
  }
  while (!lines->empty() && lines->back().empty()) lines->pop_back();
  return true;
}

// Parses header lines [1, n) into `headers`. Returns an error message or "".
std::string parse_fields(const std::vector<std::string_view>& lines, size_t max_headers,
                         HttpHeaders* headers, bool* too_many) {
  *too_many = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') {
      return "obsolete header line folding is not allowed";
    }
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) return "header line without ':'";
    std::string_view name = line.substr(0, colon);
    if (!is_token(name)) return "invalid header name";
    std::string_view value = trim_ows(line.substr(colon + 1));
    if (!is_field_value(value)) return "invalid character in header value";
    if (headers->size() >= max_headers) {
      *too_many = true;
      return "too many header fields (limit " + std::to_string(max_headers) + ")";
    }
    headers->add(std::string(name), std::string(value));
  }
  return "";
}

// Parses every Content-Length value (a field may repeat or hold a list of equal values).
// Returns false on a malformed or conflicting value.
bool content_length(const HttpHeaders& headers, bool* present, uint64_t* length) {
  *present = false;
  for (const auto& [n, v] : headers.fields()) {
    if (!iequals(n, "Content-Length")) continue;
    std::string_view rest = v;
    while (true) {
      size_t comma = rest.find(',');
      std::string_view item = trim_ows(rest.substr(0, comma));
      if (item.empty() || item.size() > 18) return false;
      uint64_t value = 0;
      for (char c : item) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + static_cast<uint64_t>(c - '0');
      }
      if (*present && value != *length) return false;
      *present = true;
      *length = value;
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return true;
}

// Checks Transfer-Encoding. Returns 0 when absent, 1 when it is (ends in) chunked alone, or an
// error status (400/501) with a message.
int transfer_encoding(const HttpHeaders& headers, std::string* message) {
  std::vector<std::string> codings;
  for (const auto& [n, v] : headers.fields()) {
    if (!iequals(n, "Transfer-Encoding")) continue;
    std::string_view rest = v;
    while (true) {
      size_t comma = rest.find(',');
      std::string_view item = trim_ows(rest.substr(0, comma));
      if (!item.empty()) codings.emplace_back(item);
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (codings.empty()) return headers.has("Transfer-Encoding") ? 400 : 0;
  if (codings.size() == 1 && iequals(codings[0], "chunked")) return 1;
  for (const auto& c : codings) {
    if (!iequals(c, "chunked")) {
      *message = "Transfer-Encoding '" + c + "' is not supported (only chunked)";
      return 501;
    }
  }
  *message = "chunked may be applied only once";
  return 400;
}

}  // namespace

void split_target(std::string_view target, std::string* path, std::string* query) {
  size_t q = target.find('?');
  *path = std::string(target.substr(0, q));
  *query = q == std::string_view::npos ? "" : std::string(target.substr(q + 1));
}

// ---------------------------------------------------------------------------------------------
// BodyDecoder

void BodyDecoder::start(Mode mode, uint64_t length, size_t max_body_bytes) {
  mode_ = mode;
  max_body_ = max_body_bytes;
  remaining_ = length;
  decoded_ = 0;
  line_.clear();
  trailer_bytes_ = 0;
  too_large_ = false;
  error_.clear();
  switch (mode) {
    case Mode::kNone:
      state_ = State::kDone;
      break;
    case Mode::kLength:
      if (length > max_body_bytes) {
        fail("body of " + std::to_string(length) + " bytes is over the limit of " +
                 std::to_string(max_body_bytes),
             true);
      } else {
        state_ = length == 0 ? State::kDone : State::kBody;
      }
      break;
    case Mode::kChunked:
      state_ = State::kChunkSize;
      break;
    case Mode::kUntilClose:
      state_ = State::kBody;
      break;
  }
}

void BodyDecoder::fail(std::string message, bool too_large) {
  state_ = State::kError;
  error_ = std::move(message);
  too_large_ = too_large;
}

bool BodyDecoder::take_line(std::string_view data, size_t* pos, std::string_view* line,
                            bool* complete) {
  size_t nl = data.find('\n', *pos);
  size_t end = nl == std::string_view::npos ? data.size() : nl;
  line_.append(data.substr(*pos, end - *pos));
  *pos = nl == std::string_view::npos ? data.size() : nl + 1;
  if (line_.size() > kMaxChunkLine) {
    fail("chunk-size or trailer line too long");
    return false;
  }
  *complete = nl != std::string_view::npos;
  if (*complete) {
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    *line = line_;
  }
  return true;
}

size_t BodyDecoder::feed(std::string_view data, std::string* out) {
  size_t pos = 0;
  while (pos < data.size() && state_ != State::kDone && state_ != State::kError) {
    switch (state_) {
      case State::kBody: {
        size_t avail = data.size() - pos;
        if (mode_ == Mode::kLength) {
          size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, avail));
          out->append(data.substr(pos, n));
          pos += n;
          remaining_ -= n;
          decoded_ += n;
          if (remaining_ == 0) state_ = State::kDone;
        } else {  // until close
          if (decoded_ + avail > max_body_) {
            fail("body is over the limit of " + std::to_string(max_body_) + " bytes", true);
            break;
          }
          out->append(data.substr(pos));
          decoded_ += avail;
          pos = data.size();
        }
        break;
      }
      case State::kChunkSize: {
        std::string_view line;
        bool complete = false;
        if (!take_line(data, &pos, &line, &complete) || !complete) break;
        size_t i = 0;
        uint64_t size = 0;
        int digits = 0;
        for (; i < line.size(); ++i) {
          char c = line[i];
          int v;
          if (c >= '0' && c <= '9')
            v = c - '0';
          else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
          else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
          else
            break;
          if (++digits > 15) {
            fail("chunk size too large");
            return pos;
          }
          size = size * 16 + static_cast<uint64_t>(v);
        }
        std::string_view rest = trim_ows(line.substr(i));
        if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
          fail("invalid chunk size line");
          return pos;
        }
        line_.clear();
        if (decoded_ + size > max_body_) {
          fail("chunked body is over the limit of " + std::to_string(max_body_) + " bytes", true);
          return pos;
        }
        if (size == 0) {
          state_ = State::kTrailer;
        } else {
          remaining_ = size;
          state_ = State::kChunkData;
        }
        break;
      }
      case State::kChunkData: {
        size_t n = static_cast<size_t>(std::min<uint64_t>(remaining_, data.size() - pos));
        out->append(data.substr(pos, n));
        pos += n;
        remaining_ -= n;
        decoded_ += n;
        if (remaining_ == 0) state_ = State::kChunkDataEnd;
        break;
      }
      case State::kChunkDataEnd: {
        std::string_view line;
        bool complete = false;
        if (!take_line(data, &pos, &line, &complete) || !complete) break;
        if (!line.empty()) {
          fail("missing CRLF after chunk data");
          return pos;
        }
        line_.clear();
        state_ = State::kChunkSize;
        break;
      }
      case State::kTrailer: {
        std::string_view line;
        bool complete = false;
        size_t before = pos;
        if (!take_line(data, &pos, &line, &complete)) break;
        trailer_bytes_ += pos - before;
        if (trailer_bytes_ > kMaxTrailerBytes) {
          fail("chunked trailer too large");
          return pos;
        }
        if (!complete) break;
        bool empty = line.empty();
        line_.clear();
        if (empty) state_ = State::kDone;
        break;
      }
      case State::kDone:
      case State::kError:
        break;
    }
  }
  return pos;
}

void BodyDecoder::on_eof() {
  if (state_ == State::kDone || state_ == State::kError) return;
  if (mode_ == Mode::kUntilClose) {
    state_ = State::kDone;
    return;
  }
  fail("connection closed before the body was complete");
}

// ---------------------------------------------------------------------------------------------
// HttpRequestParser

void HttpRequestParser::reset() {
  head_.clear();
  scan_from_ = 0;
  head_done_ = false;
  complete_ = false;
  expects_continue_ = false;
  error_status_ = 0;
  error_message_.clear();
  request_ = HttpRequest();
}

void HttpRequestParser::fail(int status, std::string message) {
  if (error_status_ != 0) return;
  error_status_ = status;
  error_message_ = std::move(message);
}

size_t HttpRequestParser::feed(std::string_view data) {
  if (failed() || complete_) return 0;
  size_t used = 0;
  if (!head_done_) {
    // Empty lines before a request line are ignored (RFC 9112, 2.2).
    if (head_.empty()) {
      while (used < data.size() && (data[used] == '\r' || data[used] == '\n')) ++used;
      data.remove_prefix(used);
      if (data.empty()) return used;
    }
    size_t old = head_.size();
    size_t room = limits_.max_header_bytes + 4 > old ? limits_.max_header_bytes + 4 - old : 0;
    size_t take = std::min(room, data.size());
    head_.append(data.substr(0, take));
    size_t end = find_head_end(head_, scan_from_ > 2 ? scan_from_ - 2 : 0);
    if (end == std::string::npos || end > limits_.max_header_bytes) {
      if (head_.size() > limits_.max_header_bytes) {
        fail(431, "request head is over the limit of " + std::to_string(limits_.max_header_bytes) +
                      " bytes");
        return used + take;
      }
      scan_from_ = head_.size();
      return used + take;
    }
    size_t head_bytes_from_data = end - old;
    head_.resize(end);
    used += head_bytes_from_data;
    data.remove_prefix(head_bytes_from_data);
    parse_head();
    if (failed()) return used;
    head_done_ = true;
    if (body_.done()) {
      complete_ = true;
      return used;
    }
  }
  std::string* body = &request_.body;
  size_t n = body_.feed(data, body);
  used += n;
  if (body_.failed()) {
    fail(body_.too_large() ? 413 : 400, body_.error());
  } else if (body_.done()) {
    complete_ = true;
  }
  return used;
}

void HttpRequestParser::parse_head() {
  std::vector<std::string_view> lines;
  if (!split_lines(head_, &lines) || lines.empty()) {
    fail(400, "malformed request head");
    return;
  }
  std::string_view start = lines[0];
  size_t sp1 = start.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : start.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos ||
      start.find(' ', sp2 + 1) != std::string_view::npos) {
    fail(400, "malformed request line");
    return;
  }
  std::string_view method = start.substr(0, sp1);
  std::string_view target = start.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = start.substr(sp2 + 1);
  if (!is_token(method)) {
    fail(400, "invalid request method");
    return;
  }
  if (target.empty()) {
    fail(400, "empty request target");
    return;
  }
  for (unsigned char c : target) {
    if (c <= 0x20 || c == 0x7f) {
      fail(400, "invalid character in request target");
      return;
    }
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    fail(400, "malformed HTTP version");
    return;
  }
  if (version[5] != '1') {
    fail(505, "HTTP version " + std::string(version) + " is not supported (use HTTP/1.1)");
    return;
  }
  request_.method = std::string(method);
  request_.target = std::string(target);
  request_.version_minor = version[7] - '0';
  // Absolute form (proxies): keep only the path.
  std::string_view path_part = target;
  if (size_t scheme = target.find("://");
      scheme != std::string_view::npos && target.front() != '/') {
    size_t slash = target.find('/', scheme + 3);
    path_part = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  split_target(path_part, &request_.path, &request_.query);

  bool too_many = false;
  std::string err = parse_fields(lines, limits_.max_headers, &request_.headers, &too_many);
  if (!err.empty()) {
    fail(too_many ? 431 : 400, err);
    return;
  }
  std::string te_message;
  int te = transfer_encoding(request_.headers, &te_message);
  bool has_length = false;
  uint64_t length = 0;
  if (!content_length(request_.headers, &has_length, &length)) {
    fail(400, "invalid Content-Length");
    return;
  }
  if (te >= 400) {
    fail(te, te_message.empty() ? "invalid Transfer-Encoding" : te_message);
    return;
  }
  if (te == 1 && has_length) {
    fail(400, "both Content-Length and Transfer-Encoding are set");
    return;
  }
  if (auto expect = request_.headers.get("Expect");
      expect && iequals(*expect, "100-continue") && request_.version_minor >= 1) {
    expects_continue_ = true;
  }
  if (te == 1) {
    body_.start(BodyDecoder::Mode::kChunked, 0, limits_.max_body_bytes);
  } else {
    body_.start(has_length ? BodyDecoder::Mode::kLength : BodyDecoder::Mode::kNone, length,
                limits_.max_body_bytes);
  }
  if (body_.failed()) fail(413, body_.error());
}

// ---------------------------------------------------------------------------------------------
// HttpResponseParser

void HttpResponseParser::reset() {
  head_.clear();
  scan_from_ = 0;
  head_done_ = false;
  complete_ = false;
  keep_alive_ = true;
  status_ = 0;
  version_minor_ = 1;
  reason_.clear();
  error_.clear();
  headers_.clear();
}

void HttpResponseParser::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
}

size_t HttpResponseParser::feed(std::string_view data, std::string* body) {
  size_t used = 0;
  while (!failed() && !complete_ && !data.empty()) {
    if (!head_done_) {
      size_t old = head_.size();
      size_t room = limits_.max_header_bytes + 4 > old ? limits_.max_header_bytes + 4 - old : 0;
      size_t take = std::min(room, data.size());
      head_.append(data.substr(0, take));
      size_t end = find_head_end(head_, scan_from_ > 2 ? scan_from_ - 2 : 0);
      if (end == std::string::npos || end > limits_.max_header_bytes) {
        if (head_.size() > limits_.max_header_bytes) {
          fail("response head is over the limit of " + std::to_string(limits_.max_header_bytes) +
               " bytes");
        }
        scan_from_ = head_.size();
        return used + take;
      }
      size_t n = end - old;
      head_.resize(end);
      used += n;
      data.remove_prefix(n);
      parse_head();
      if (failed()) return used;
      if (status_ >= 100 && status_ < 200 && status_ != 101) {
        // Interim response (100 Continue, 103 Early Hints): wait for the final one.
        head_.clear();
        scan_from_ = 0;
        headers_.clear();
        continue;
      }
      head_done_ = true;
      if (body_.done()) {
        complete_ = true;
        return used;
      }
      continue;
    }
    size_t n = body_.feed(data, body);
    used += n;
    data.remove_prefix(n);
    if (body_.failed())
      fail(body_.error());
    else if (body_.done())
      complete_ = true;
    if (n == 0) break;
  }
  return used;
}

void HttpResponseParser::on_eof() {
  if (complete_ || failed()) return;
  if (!head_done_) {
    fail(head_.empty() ? "server closed the connection without a response"
                       : "server closed the connection in the middle of the response head");
    return;
  }
  body_.on_eof();
  if (body_.failed())
    fail("server closed the connection before the response body was complete");
  else
    complete_ = true;
}

void HttpResponseParser::parse_head() {
  std::vector<std::string_view> lines;
  if (!split_lines(head_, &lines) || lines.empty()) {
    fail("malformed response head");
    return;
  }
  std::string_view start = lines[0];
  if (start.size() < 12 || start.substr(0, 5) != "HTTP/" || start[6] != '.' || start[8] != ' ') {
    fail("malformed status line: '" + std::string(start.substr(0, 80)) + "'");
    return;
  }
  version_minor_ = start[7] - '0';
  int status = 0;
  for (size_t i = 9; i < 12; ++i) {
    if (start[i] < '0' || start[i] > '9') {
      fail("malformed status code in '" + std::string(start.substr(0, 80)) + "'");
      return;
    }
    status = status * 10 + (start[i] - '0');
  }
  if (start.size() > 12 && start[12] != ' ') {
    fail("malformed status line");
    return;
  }
  status_ = status;
  reason_ = start.size() > 13 ? std::string(start.substr(13)) : "";
  bool too_many = false;
  std::string err = parse_fields(lines, limits_.max_headers, &headers_, &too_many);
  if (!err.empty()) {
    fail("bad response header: " + err);
    return;
  }
  keep_alive_ = !headers_.has_token("Connection", "close") &&
                (version_minor_ >= 1 || headers_.has_token("Connection", "keep-alive"));
  if (head_request_ || (status_ >= 100 && status_ < 200) || status_ == 204 || status_ == 304) {
    body_.start(BodyDecoder::Mode::kNone, 0, limits_.max_body_bytes);
    return;
  }
  std::string te_message;
  int te = transfer_encoding(headers_, &te_message);
  bool has_length = false;
  uint64_t length = 0;
  if (!content_length(headers_, &has_length, &length)) {
    fail("invalid Content-Length in response");
    return;
  }
  if (te >= 400) {
    fail(te_message.empty() ? "invalid Transfer-Encoding in response" : te_message);
    return;
  }
  if (te == 1) {
    body_.start(BodyDecoder::Mode::kChunked, 0, limits_.max_body_bytes);
  } else if (has_length) {
    body_.start(BodyDecoder::Mode::kLength, length, limits_.max_body_bytes);
  } else {
    keep_alive_ = false;
    body_.start(BodyDecoder::Mode::kUntilClose, 0, limits_.max_body_bytes);
  }
  if (body_.failed()) fail(body_.error());
}

}  // namespace strata::net
