// TOPOCOLL_NET_PLANE_ADDRS: entries a peer cannot reach (wildcard, broadcast) and NICs or
// addresses given twice are refused with an error naming the entry.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "plugin/net/net_device.h"

namespace topocoll::plugin {
namespace {

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const auto& e : errors)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

TEST(PlaneAddrs, UnreachableAndDuplicateEntriesAreRefusedByName) {
  std::vector<std::string> errors;
  const auto parsed = parse_plane_addresses(
      "nic0=10.0.0.1,nic1=0.0.0.0,nic2=255.255.255.255,nic0=10.0.0.9,nic3=10.0.0.1,nic4=::,nic5=10.0.0.5",
      &errors);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0].first, "nic0");
  EXPECT_EQ(parsed[0].second.ip_string(), "10.0.0.1");
  EXPECT_EQ(parsed[1].first, "nic5");
  EXPECT_EQ(errors.size(), 5u);
  EXPECT_TRUE(mentions(errors, "\"nic1=0.0.0.0\": 0.0.0.0 is not an address a peer can reach")) << errors[0];
  EXPECT_TRUE(mentions(errors, "\"nic2=255.255.255.255\": 255.255.255.255 is not an address"));
  EXPECT_TRUE(mentions(errors, "\"nic0=10.0.0.9\": NIC nic0 is listed twice"));
  EXPECT_TRUE(mentions(errors, "\"nic3=10.0.0.1\": address 10.0.0.1 is given to two NICs"));
  EXPECT_TRUE(mentions(errors, "\"nic4=::\""));
}

}  // namespace
}  // namespace topocoll::plugin
