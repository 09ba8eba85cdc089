// The network interface ranks on several hosts talk over. The classic multi-node hang: every
// host has an interface with the same private address (docker0's 172.17.0.1, a libvirt bridge),
// MPI's TCP transport offers it to its peers, and a peer connects to its own copy and waits.
// choose_interface() picks, before MPI starts, the interface whose route reaches the launcher
// (mpirun's addresses, which every rank receives in its environment), so addresses that exist on
// this host too are never chosen; a named interface (--distributed-interface, STRATA_SOCKET_IFNAME)
// is checked to exist, with the available ones listed when it does not.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace strata::net {

// One IPv4 address of a local interface.
struct LocalInterface {
  std::string name;     // "eth0"
  std::string address;  // "10.0.0.2"
  bool up = true;
  bool loopback = false;
};

// This host's IPv4 interfaces (getifaddrs).
std::vector<LocalInterface> list_interfaces();

// The IPv4 addresses in an Open MPI launcher URI (OMPI_MCA_orte_hnp_uri,
// "1159069696.0;tcp://10.0.0.1,172.17.0.1:54055", possibly several "tcp://..." parts), in order.
std::vector<std::string> parse_launcher_addresses(std::string_view uri);

// The local address the kernel would send from to reach `address` (a route lookup: a UDP socket
// connected to it, no packet sent); nullopt when there is no route.
std::optional<std::string> route_source_address(const std::string& address);

struct InterfaceChoice {
  std::string name;    // empty: leave the choice to MPI (one host, or nothing to go by)
  std::string reason;  // for the start-up log: "named by --distributed-interface", ...
};

// `requested`: the interface the user named (empty: choose). `launcher`: the launcher's addresses
// (parse_launcher_addresses). `route`: route_source_address, replaceable in tests.
// - named: it must be a local interface that is up and has an IPv4 address, else an error that
//   lists the usable ones;
// - else the first launcher address that is not one of this host's own addresses and has a route:
//   the interface holding the route's source address;
// - else (this host is the launcher's, or no launcher is known) no choice: MPI's default.
Result<InterfaceChoice> choose_interface(
    const std::string& requested, const std::vector<LocalInterface>& local,
    const std::vector<std::string>& launcher,
    const std::function<std::optional<std::string>(const std::string&)>& route);

}  // namespace strata::net
