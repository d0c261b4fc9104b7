#include "net/interface_list.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace topocoll::net {
namespace {

TEST(InterfaceSelector, PrefixExcludeAndExact) {
  InterfaceSelector prefix("eth,ib");
  EXPECT_TRUE(prefix.matches("eth0"));
  EXPECT_TRUE(prefix.matches("ib1"));
  EXPECT_FALSE(prefix.matches("lo"));
  InterfaceSelector exclude("^docker,lo");
  EXPECT_FALSE(exclude.matches("docker0"));
  EXPECT_FALSE(exclude.matches("lo"));
  EXPECT_TRUE(exclude.matches("eth0"));
  InterfaceSelector exact("=eth0");
  EXPECT_TRUE(exact.matches("eth0"));
  EXPECT_FALSE(exact.matches("eth01"));
  InterfaceSelector exclude_exact("^=eth0");
  EXPECT_FALSE(exclude_exact.matches("eth0"));
  EXPECT_TRUE(exclude_exact.matches("eth01"));
  InterfaceSelector fallback("");
  EXPECT_TRUE(fallback.is_default());
  EXPECT_FALSE(fallback.matches("lo"));
  EXPECT_FALSE(fallback.matches("docker0"));
  EXPECT_FALSE(fallback.matches("virbr0"));
  EXPECT_TRUE(fallback.matches("ens5"));
}

NetworkInterface named(const char* name) {
  NetworkInterface n;
  n.name = name;
  n.address = *SocketAddress::parse("10.0.0.1", 0);
  n.loopback = std::string_view(name).starts_with("lo");
  return n;
}

std::vector<std::string> names_of(const std::vector<NetworkInterface>& list) {
  std::vector<std::string> out;
  for (const auto& n : list) out.push_back(n.name);
  return out;
}

// As NCCL picks its socket interfaces (misc/socket.cc): IPoIB if any, else everything but
// docker, loopback and libvirt bridges (virbr0 has the same address on every host, so a
// peer would connect to its own bridge), then each of those as a last resort.
TEST(InterfaceSelector, DefaultOrderIsNcclsOwn) {
  const InterfaceSelector def("");
  EXPECT_EQ(names_of(select_interfaces({named("lo"), named("eth0"), named("ib0"), named("virbr0")}, def)),
            (std::vector<std::string>{"ib0"}));
  EXPECT_EQ(names_of(select_interfaces({named("lo"), named("eth0"), named("virbr0"), named("docker0"), named("ens5")},
                                       def)),
            (std::vector<std::string>{"eth0", "ens5"}));
  EXPECT_EQ(names_of(select_interfaces({named("lo"), named("virbr0"), named("docker0")}, def)),
            (std::vector<std::string>{"docker0"}));
  EXPECT_EQ(names_of(select_interfaces({named("virbr0"), named("lo")}, def)), (std::vector<std::string>{"lo"}));
  EXPECT_EQ(names_of(select_interfaces({named("virbr0")}, def)), (std::vector<std::string>{"virbr0"}));
  // A selector given is followed as written, with no fallback.
  EXPECT_TRUE(select_interfaces({named("lo")}, InterfaceSelector("eth")).empty());
}

TEST(InterfaceList, LoopbackIsListedAndSelectable) {
  auto all = list_interfaces();
  auto lo = select_interfaces(all, InterfaceSelector("=lo"));
  ASSERT_EQ(lo.size(), 1u);
  EXPECT_TRUE(lo[0].loopback);
  EXPECT_TRUE(lo[0].address.is_set());
  // The default selection is never empty: loopback is the last resort.
  EXPECT_FALSE(select_interfaces(all, InterfaceSelector("")).empty());
}

TEST(SocketAddress, ParseAndFormat) {
  auto v4 = SocketAddress::parse("127.0.0.3", 80);
  ASSERT_TRUE(v4);
  EXPECT_EQ(v4->to_string(), "127.0.0.3:80");
  auto v6 = SocketAddress::parse("::1", 80);
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->to_string(), "[::1]:80");
  EXPECT_FALSE(SocketAddress::parse("nic0"));
}

}  // namespace
}  // namespace topocoll::net
