// What `fabric up` hands iproute2: every namespace and veth pair in the root batch, every
// cable end shaped at its direction's rate, rules and routes as the plan compiled them.
#include <gtest/gtest.h>

#include "fabric/fabric_plan.h"
#include "fabric/fabric_script.h"
#include "topo/topology_json.h"

namespace topocoll::fabric {
namespace {

TEST(FabricScript, RootBatchMakesEveryNamespaceAndCable) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/nap-4x8.json");
  const FabricPlan plan = plan_fabric(t, {});
  const std::string batch = root_batch(plan);
  size_t netns = 0, links = 0;
  for (size_t at = batch.find("netns add "); at != std::string::npos; at = batch.find("netns add ", at + 1)) ++netns;
  for (size_t at = batch.find("link add "); at != std::string::npos; at = batch.find("link add ", at + 1)) ++links;
  EXPECT_EQ(netns, plan.namespaces.size());
  EXPECT_EQ(links, plan.cables.size() + 32);  // cables, and a management port per host
  EXPECT_NE(batch.find("link add nic0.p0.s0 netns tf-tf-p0.h0 type veth peer name p0.n0 netns tf-tf-p0.s0"),
            std::string::npos);
}

TEST(FabricScript, EachEndShapesItsOwnDirection) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/nap-4x8.json");
  FabricOptions o;
  o.rate_mbit = 40;  // intra-package 40, torus 20
  const FabricPlan plan = plan_fabric(t, o);
  int host = -1;
  for (int i = 0; i < int(plan.namespaces.size()); ++i)
    if (plan.namespaces[i].node == "p0.h0") host = i;
  ASSERT_GE(host, 0);
  const NamespaceScript s = namespace_script(plan, host);
  EXPECT_NE(s.shapers.find("dev nic0.p0.s0 root tbf rate 40000000bit"), std::string::npos) << s.shapers;
  EXPECT_NE(s.shapers.find("dev nic0.p1.n0 root tbf rate 20000000bit"), std::string::npos) << s.shapers;
  EXPECT_NE(s.shapers.find("peakrate 40400000bit mtu 9064"), std::string::npos);
  EXPECT_NE(s.links.find("addr replace 10.1.0.1/32 dev lo"), std::string::npos);
  EXPECT_NE(s.rules.find("fwmark 256 lookup"), std::string::npos);  // lane 0's stripe table
  EXPECT_NE(s.routes.find("nexthop via"), std::string::npos);       // unmarked: multipath
  bool forwards = false;
  for (const auto& x : s.sysctls) forwards = forwards || (x.path == "net/ipv4/ip_forward" && x.value == "1");
  EXPECT_TRUE(forwards) << "a NAP node forwards torus traffic";
}

TEST(FabricScript, ShaperQueuesInsteadOfDropping) {
  const auto args = shaper_arguments("nic0", 10, 9000);
  std::string line;
  for (const auto& a : args) line += a + " ";
  EXPECT_EQ(line, "qdisc replace dev nic0 root tbf rate 10000000bit burst 18128 limit 16777216 "
                  "peakrate 10100000bit mtu 9064 ");
}

}  // namespace
}  // namespace topocoll::fabric
