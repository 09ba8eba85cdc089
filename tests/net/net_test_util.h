// Blocking raw-socket helpers for driving the HTTP server byte by byte in tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace strata::net::testing {

// A blocking loopback connection with a receive timeout (a safety net against hangs, not a test
// of speed); -1 on failure.
inline int connect_raw(int port, double recv_timeout_s = 120.0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  timeval tv{};
  tv.tv_sec = static_cast<long>(recv_timeout_s);
  tv.tv_usec = static_cast<long>((recv_timeout_s - static_cast<double>(tv.tv_sec)) * 1e6);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

inline bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until `done(buffer)` is true, the peer closes, or the receive timeout hits.
inline std::string read_until(int fd, const std::function<bool(const std::string&)>& done) {
  std::string buf;
  char tmp[65536];
  while (!done(buf)) {
    ssize_t n = ::recv(fd, tmp, sizeof(tmp), 0);
    if (n <= 0) break;
    buf.append(tmp, static_cast<size_t>(n));
  }
  return buf;
}

inline std::string read_until_close(int fd) {
  return read_until(fd, [](const std::string&) { return false; });
}

inline bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// Polls `pred` every millisecond for up to `timeout_s` (a safety net: far longer than anything
// needs on a loaded machine, never what a test measures).
inline bool wait_for(const std::function<bool()>& pred, double timeout_s = 120.0) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

}  // namespace strata::net::testing
