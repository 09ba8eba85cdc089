#include "net/interfaces.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace strata::net {

std::vector<LocalInterface> list_interfaces() {
  std::vector<LocalInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    char buf[INET_ADDRSTRLEN] = {};
    const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if (inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    out.push_back(
        {a->ifa_name, buf, (a->ifa_flags & IFF_UP) != 0, (a->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

std::vector<std::string> parse_launcher_addresses(std::string_view uri) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = uri.find("tcp://", pos)) != std::string_view::npos) {
    pos += 6;
    // "a,b,c:port": addresses up to the last ':' before the next ';'.
    const size_t end_part = std::min(uri.find(';', pos), uri.size());
    std::string_view part = uri.substr(pos, end_part - pos);
    const size_t colon = part.rfind(':');
    if (colon != std::string_view::npos) part = part.substr(0, colon);
    size_t start = 0;
    while (start <= part.size()) {
      const size_t comma = std::min(part.find(',', start), part.size());
      std::string addr(part.substr(start, comma - start));
      in_addr parsed{};
      if (inet_pton(AF_INET, addr.c_str(), &parsed) == 1 &&
          std::find(out.begin(), out.end(), addr) == out.end())
        out.push_back(addr);
      start = comma + 1;
    }
    pos = end_part;
  }
  return out;
}

std::optional<std::string> route_source_address(const std::string& address) {
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(9);  // any port: connect() on a UDP socket only looks the route up
  if (inet_pton(AF_INET, address.c_str(), &dst.sin_addr) != 1) return std::nullopt;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&dst), sizeof(dst)) == 0) {
    sockaddr_in src{};
    socklen_t len = sizeof(src);
    char buf[INET_ADDRSTRLEN] = {};
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len) == 0 &&
        inet_ntop(AF_INET, &src.sin_addr, buf, sizeof(buf)) != nullptr)
      out = std::string(buf);
  }
  close(fd);
  return out;
}

Result<InterfaceChoice> choose_interface(
    const std::string& requested, const std::vector<LocalInterface>& local,
    const std::vector<std::string>& launcher,
    const std::function<std::optional<std::string>(const std::string&)>& route) {
  auto usable = [&] {
    std::string names;
    for (const LocalInterface& i : local) {
      if (!i.up || names.find(i.name + " (") != std::string::npos) continue;
      if (!names.empty()) names += ", ";
      names += i.name + " (" + i.address + ")";
    }
    return names.empty() ? std::string("none") : names;
  };
  if (!requested.empty()) {
    for (const LocalInterface& i : local)
      if (i.name == requested && i.up) return InterfaceChoice{i.name, "named by the user"};
    return invalid_argument("network interface '" + requested +
                            "' does not exist on this host or is down (or has no IPv4 "
                            "address); interfaces here: " +
                            usable() + ". Set --distributed-interface or STRATA_SOCKET_IFNAME");
  }
  auto is_local = [&](const std::string& addr) {
    return std::any_of(local.begin(), local.end(),
                       [&](const LocalInterface& i) { return i.address == addr; });
  };
  for (const std::string& addr : launcher) {
    if (is_local(addr)) continue;  // our own copy of a shared private address, or our host
    const std::optional<std::string> src = route(addr);
    if (!src) continue;
    for (const LocalInterface& i : local)
      if (i.address == *src && !i.loopback)
        return InterfaceChoice{i.name, "routes to the launcher at " + addr};
  }
  return InterfaceChoice{"", launcher.empty() ? "no launcher address known: MPI's default"
                                              : "this host runs the launcher: MPI's default"};
}

}  // namespace strata::net
