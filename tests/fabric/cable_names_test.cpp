// Cable names: every cable of the examples round-trips through its name, both orders and the
// directed form parse, and bad names say what is wrong.
#include <gtest/gtest.h>

#include "topo/cable_names.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::topo {
namespace {

using testing_support::example_topology;

TEST(CableNames, EveryCableRoundTrips) {
  for (const char* file : {"bigraph-32.json", "nap-4x8.json", "bigraph-16x8.json", "nap-16x8.json"}) {
    const Topology t = example_topology(file);
    const auto cables = cable_links(t);
    ASSERT_FALSE(cables.empty());
    for (int link : cables) {
      const std::string name = cable_name(t, link);
      const CableSelection s = find_cable(t, name);
      EXPECT_EQ(s.link, link) << file << " " << name;
      EXPECT_TRUE(s.both_directions);
      EXPECT_EQ(cable_name(t, t.links()[link].reverse), name);
      const CableSelection back = find_cable(t, link_name(t, t.links()[link].reverse));
      EXPECT_EQ(back.link, t.links()[link].reverse);
      EXPECT_FALSE(back.both_directions);
    }
  }
}

TEST(CableNames, EitherOrderNamesTheCable) {
  const Topology t = example_topology("bigraph-32.json");
  EXPECT_EQ(cable_name(t, find_cable(t, "U0-L3").link), "U0-L3");
  EXPECT_EQ(find_cable(t, "L3-U0").link, find_cable(t, "U0-L3").link);
  EXPECT_EQ(cable_name(t, find_cable(t, "U0-s0.g0").link), "s0.g0-U0");
  EXPECT_EQ(link_name(t, find_cable(t, "U0->L3").link), "U0->L3");
}

TEST(CableNames, BadNamesSayWhy) {
  const Topology t = example_topology("bigraph-32.json");
  auto message = [&](const std::string& name) {
    try {
      find_cable(t, name);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message("U0-U1").find("not cabled"), std::string::npos) << message("U0-U1");
  EXPECT_NE(message("U0-X9").find("no two node ids"), std::string::npos);
  EXPECT_NE(message("s0.g0-L0").find("not cabled"), std::string::npos);
  EXPECT_NE(message("U0-L3#2").find("only 1 cable"), std::string::npos);
  EXPECT_NE(message("U0-L3#x").find("expected"), std::string::npos);
  // #0 read the cable before the first (ASan: heap-buffer-overflow).
  EXPECT_NE(message("U0-L3#0").find("count from 1"), std::string::npos) << message("U0-L3#0");
  EXPECT_NE(message("U0->L3#0000").find("count from 1"), std::string::npos);
}

}  // namespace
}  // namespace topocoll::topo
