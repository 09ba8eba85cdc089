// Thin POSIX socket helpers: listening and connecting TCP sockets (non-blocking, close-on-exec),
// name resolution and the open-file limit. Every failure is a Status naming the address.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "core/status.h"

namespace strata::net {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  std::string to_string() const;  // "127.0.0.1:8000", "[::1]:8000"
};

// Resolves `host` ("127.0.0.1", "localhost", "::1") for TCP; the first address wins.
Result<SocketAddress> resolve_address(const std::string& host, int port);

// A listening socket bound to host:port (port 0 picks a free one), non-blocking.
// *bound_port receives the actual port.
Result<int> listen_tcp(const std::string& host, int port, int backlog, int* bound_port);

// Starts a non-blocking connect; the socket becomes writable when the connection completes (check
// with socket_error()). Connection refused on loopback may be reported immediately.
Result<int> start_connect(const SocketAddress& address);

// The pending error of a socket (SO_ERROR), 0 when none.
int socket_error(int fd);

void set_nodelay(int fd);

// Raises the soft RLIMIT_NOFILE to the hard limit; returns the soft limit now in force.
uint64_t raise_open_file_limit();

// strerror text for errno values, thread-safe.
std::string errno_text(int err);

}  // namespace strata::net
