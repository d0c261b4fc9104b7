#include "net/interface_list.h"

#include <gtest/gtest.h>

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
  EXPECT_TRUE(fallback.matches("ens5"));
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
