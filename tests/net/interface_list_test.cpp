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

NetworkInterface with_subnets(const char* name, std::vector<std::pair<const char*, const char*>> subnets) {
  NetworkInterface n = named(name);
  for (const auto& [address, mask] : subnets) n.subnets.push_back({*SocketAddress::parse(address), *SocketAddress::parse(mask)});
  n.address = n.subnets.front().address;
  return n;
}

// With NCCL_COMM_ID (and no IPoIB), NCCL takes the one interface with an address in the
// root's subnet, that address (ncclFindInterfaceMatchSubnet), before its default tier.
TEST(InterfaceSelector, TheCommIdsSubnetChoosesBeforeTheDefault) {
  const InterfaceSelector def("");
  const std::vector<NetworkInterface> all = {
      with_subnets("eth0", {{"192.168.1.5", "255.255.255.0"}}),
      with_subnets("eth1", {{"10.1.0.5", "255.255.0.0"}, {"10.2.0.5", "255.255.0.0"}}),
      with_subnets("eth2", {{"10.2.7.7", "255.255.0.0"}}),
      with_subnets("lo", {{"127.0.0.1", "255.0.0.0"}})};
  auto chosen = select_interfaces(all, def, SocketAddress::parse("10.2.200.1", 29500));
  ASSERT_EQ(names_of(chosen), (std::vector<std::string>{"eth1"}));
  EXPECT_EQ(chosen[0].address.ip_string(), "10.2.0.5") << "the address in the subnet, not the first";
  // No interface in its subnet: the default tier, as without it.
  EXPECT_EQ(names_of(select_interfaces(all, def, SocketAddress::parse("172.16.0.1"))),
            (std::vector<std::string>{"eth0", "eth1", "eth2"}));
  // A root on loopback picks lo, ahead of the other interfaces.
  EXPECT_EQ(names_of(select_interfaces(all, def, SocketAddress::parse("127.0.0.1"))), (std::vector<std::string>{"lo"}));
  // IPoIB first, and a selector given wins over it.
  std::vector<NetworkInterface> with_ib = all;
  with_ib.push_back(with_subnets("ib0", {{"10.9.0.1", "255.255.0.0"}}));
  EXPECT_EQ(names_of(select_interfaces(with_ib, def, SocketAddress::parse("10.2.0.1"))), (std::vector<std::string>{"ib0"}));
  EXPECT_EQ(names_of(select_interfaces(all, InterfaceSelector("eth0"), SocketAddress::parse("10.2.0.1"))),
            (std::vector<std::string>{"eth0"}));
  // IPv6: the mask's bits, and a link-local address only in its own scope.
  const std::vector<NetworkInterface> v6 = {with_subnets("eth0", {{"fd00:1::5", "ffff:ffff::"}}),
                                            with_subnets("eth1", {{"fd00:2::5", "ffff:ffff::"}})};
  EXPECT_EQ(names_of(select_interfaces(v6, def, SocketAddress::parse("fd00:2::99"))), (std::vector<std::string>{"eth1"}));
  SocketAddress local = *SocketAddress::parse("fe80::1"), mask = *SocketAddress::parse("ffff:ffff:ffff:ffff::");
  local.scope_id = 3;
  SocketAddress root = *SocketAddress::parse("fe80::2");
  root.scope_id = 4;
  EXPECT_FALSE(same_subnet(local, root, mask));
  root.scope_id = 3;
  EXPECT_TRUE(same_subnet(local, root, mask));
  EXPECT_FALSE(same_subnet(*SocketAddress::parse("10.0.0.1"), *SocketAddress::parse("::1"), mask));
  // A root at a link-local address does not choose the interface of that link: the handle
  // it would publish carries no scope, and no peer could reach it. The default tier instead.
  NetworkInterface link = with_subnets("eth2", {{"fe80::1", "ffff:ffff:ffff:ffff::"}});
  link.subnets[0].address.scope_id = 3;
  const std::vector<NetworkInterface> with_link = {with_subnets("eth0", {{"fd00:1::5", "ffff:ffff::"}}), link};
  EXPECT_EQ(names_of(select_interfaces(with_link, def, root)), (std::vector<std::string>{"eth0", "eth2"}));
}

TEST(InterfaceList, LoopbackIsListedAndSelectable) {
  auto all = list_interfaces();
  auto lo = select_interfaces(all, InterfaceSelector("=lo"));
  ASSERT_EQ(lo.size(), 1u);
  EXPECT_TRUE(lo[0].loopback);
  EXPECT_TRUE(lo[0].address.is_set());
  // Its addresses with their masks: 127.0.0.1/8 among them.
  bool loopback_subnet = false;
  for (const auto& s : lo[0].subnets)
    loopback_subnet |= s.address.ip_string() == "127.0.0.1" && s.netmask.ip_string() == "255.0.0.0";
  EXPECT_TRUE(loopback_subnet);
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
