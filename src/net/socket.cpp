#include "net/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace strata::net {

std::string errno_text(int err) {
  char buf[256];
  // GNU strerror_r returns a pointer that may or may not be buf.
  const char* text = strerror_r(err, buf, sizeof(buf));
  return text;
}

std::string SocketAddress::to_string() const {
  char host[INET6_ADDRSTRLEN] = {0};
  if (storage.ss_family == AF_INET) {
    auto* a = reinterpret_cast<const sockaddr_in*>(&storage);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(ntohs(a->sin_port));
  }
  if (storage.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    std::string out = "[";
    out += host;
    out += "]:";
    out += std::to_string(ntohs(a->sin6_port));
    return out;
  }
  return "?";
}

Result<SocketAddress> resolve_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string lookup = host.empty() ? "0.0.0.0" : host;
  int rc = getaddrinfo(lookup.c_str(), std::to_string(port).c_str(), &hints, &res);
  if (rc != 0) {
    return not_found("cannot resolve host '" + host + "': " + gai_strerror(rc));
  }
  SocketAddress out;
  // Prefer IPv4 when both exist ("localhost" often lists ::1 first while servers bind 127.0.0.1).
  addrinfo* pick = res;
  for (addrinfo* p = res; p != nullptr; p = p->ai_next) {
    if (p->ai_family == AF_INET) {
      pick = p;
      break;
    }
  }
  std::memcpy(&out.storage, pick->ai_addr, pick->ai_addrlen);
  out.length = pick->ai_addrlen;
  freeaddrinfo(res);
  return out;
}

Result<int> listen_tcp(const std::string& host, int port, int backlog, int* bound_port) {
  auto addr = resolve_address(host, port);
  if (!addr.ok()) return addr.status();
  int fd = ::socket(addr->storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("socket(): " + errno_text(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr->storage), addr->length) != 0) {
    int err = errno;
    ::close(fd);
    std::string hint = err == EADDRINUSE ? " (another process uses this port; pick another with "
                                           "--port)"
                                         : "";
    return unavailable("cannot listen on " + addr->to_string() + ": " + errno_text(err) + hint);
  }
  if (::listen(fd, backlog) != 0) {
    int err = errno;
    ::close(fd);
    return unavailable("listen() on " + addr->to_string() + ": " + errno_text(err));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  if (bound_port != nullptr) {
    *bound_port = bound.ss_family == AF_INET6
                      ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                      : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  }
  return fd;
}

Result<int> start_connect(const SocketAddress& address) {
  int fd = ::socket(address.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return unavailable("socket(): " + errno_text(errno));
  set_nodelay(fd);
  int rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length);
  if (rc != 0 && errno != EINPROGRESS) {
    int err = errno;
    ::close(fd);
    std::string hint = err == ECONNREFUSED ? " (is the server running and listening there?)" : "";
    return unavailable("cannot connect to " + address.to_string() + ": " + errno_text(err) + hint);
  }
  return fd;
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof(err);
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
  return err;
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

uint64_t raise_open_file_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    rlimit want = lim;
    want.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &want) == 0) lim = want;
  }
  return static_cast<uint64_t>(lim.rlim_cur);
}

}  // namespace strata::net
