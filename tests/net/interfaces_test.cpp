#include "net/interfaces.h"

#include <gtest/gtest.h>

namespace strata::net {
namespace {

TEST(LauncherAddresses, ParsesOpenMpiUris) {
  EXPECT_EQ(parse_launcher_addresses("1159069696.0;tcp://10.77.0.1,172.17.0.1:54055"),
            (std::vector<std::string>{"10.77.0.1", "172.17.0.1"}));
  EXPECT_EQ(parse_launcher_addresses("7.0;tcp://192.168.1.5:1000;tcp://10.0.0.1,192.168.1.5:1001"),
            (std::vector<std::string>{"192.168.1.5", "10.0.0.1"}));
  // IPv6 parts and garbage give no addresses, never a crash.
  EXPECT_TRUE(parse_launcher_addresses("7.0;tcp6://[fe80::1]:1000").empty());
  EXPECT_TRUE(parse_launcher_addresses("").empty());
  EXPECT_TRUE(parse_launcher_addresses("tcp://").empty());
  EXPECT_TRUE(parse_launcher_addresses("tcp://not-an-ip:12").empty());
}

// A host like the second one of a cluster: its own docker0 has the same address as the
// launcher's, and eth0 is the way to the launcher.
std::vector<LocalInterface> worker_host() {
  return {{"lo", "127.0.0.1", true, true},
          {"eth0", "10.77.0.2", true, false},
          {"docker0", "172.17.0.1", true, false},
          {"ib0", "10.99.0.2", false, false}};
}

TEST(ChooseInterface, SkipsAddressesThisHostAlsoHasAndFollowsTheRoute) {
  std::vector<std::string> asked;
  auto route = [&](const std::string& a) -> std::optional<std::string> {
    asked.push_back(a);
    if (a == "10.77.0.1") return "10.77.0.2";
    return std::nullopt;
  };
  auto c = choose_interface("", worker_host(), {"172.17.0.1", "10.77.0.1"}, route);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->name, "eth0");
  EXPECT_NE(c->reason.find("10.77.0.1"), std::string::npos);
  // 172.17.0.1 is this host's own docker0: never even routed.
  EXPECT_EQ(asked, std::vector<std::string>{"10.77.0.1"});
}

TEST(ChooseInterface, TheLauncherHostKeepsMpisDefault) {
  auto route = [](const std::string&) -> std::optional<std::string> { return "10.77.0.1"; };
  std::vector<LocalInterface> launcher_host = {{"eth0", "10.77.0.1", true, false},
                                               {"docker0", "172.17.0.1", true, false}};
  auto c = choose_interface("", launcher_host, {"10.77.0.1", "172.17.0.1"}, route);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->name, "");
  auto none = choose_interface("", launcher_host, {}, route);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->name, "");
}

TEST(ChooseInterface, ANamedInterfaceMustExistAndBeUp) {
  auto route = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
  auto ok = choose_interface("docker0", worker_host(), {"10.77.0.1"}, route);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->name, "docker0");
  for (const char* bad : {"eth9", "ib0"}) {
    auto e = choose_interface(bad, worker_host(), {}, route);
    ASSERT_FALSE(e.ok()) << bad;
    const std::string& m = e.status().message();
    EXPECT_NE(m.find(bad), std::string::npos) << m;
    EXPECT_NE(m.find("eth0 (10.77.0.2)"), std::string::npos) << m;  // lists what there is
    EXPECT_EQ(m.find("ib0 ("), std::string::npos) << m;             // down: not offered
  }
}

TEST(ChooseInterface, RealRouteLookupOnThisHost) {
  // The loopback address routes from itself; an unparseable one has no route.
  EXPECT_EQ(route_source_address("127.0.0.1"), std::optional<std::string>("127.0.0.1"));
  EXPECT_FALSE(route_source_address("bogus").has_value());
  bool has_lo = false;
  for (const LocalInterface& i : list_interfaces()) has_lo |= i.loopback;
  EXPECT_TRUE(has_lo);
}

}  // namespace
}  // namespace strata::net
