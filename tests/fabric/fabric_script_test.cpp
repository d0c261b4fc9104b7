// What `fabric up` hands iproute2: every namespace and veth pair in the root batch, every
// cable end shaped at its direction's rate, rules and routes as the plan compiled them.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

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
  EXPECT_NE(batch.find("link add name nic0.p0.s0 netns tf-tf-p0.h0 type veth peer name p0.n0 netns tf-tf-p0.s0"),
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
  // The peak bucket: one frame (9000 + 64) and 100 us of 40.4 Mbit/s (505 bytes).
  EXPECT_NE(s.shapers.find("peakrate 40400000bit mtu 9569"), std::string::npos) << s.shapers;
  // On lo, under a label of its own: programs that choose an interface by name
  // (NCCL_SOCKET_IFNAME==lo-nic0) find this address, not 127.0.0.1.
  EXPECT_NE(s.links.find("addr replace 10.1.0.1/32 dev lo label lo-nic0\n"), std::string::npos) << s.links;
  EXPECT_NE(s.rules.find("fwmark 256 lookup"), std::string::npos);  // lane 0's stripe table
  EXPECT_NE(s.routes.find("nexthop via"), std::string::npos);       // unmarked: multipath
  bool forwards = false;
  for (const auto& x : s.sysctls) forwards = forwards || (x.path == "net/ipv4/ip_forward" && x.value == "1");
  EXPECT_TRUE(forwards) << "a NAP node forwards torus traffic";
}

std::string joined(const std::vector<std::string>& args) {
  std::string line;
  for (const auto& a : args) line += a + " ";
  return line;
}

TEST(FabricScript, ShaperQueuesInsteadOfDropping) {
  EXPECT_EQ(joined(shaper_arguments("nic0", 10, 9000, 0)),
            "qdisc replace dev nic0 root tbf rate 10000000bit burst 18128 limit 16777216 "
            "peakrate 10100000bit mtu 9064 ");
}

// One frame of peak bucket lost the kernel timer's lateness on every packet: a 1000 Mbit/s
// cable carried 0.89 of its rate over TCP (perf/results/fabric-peak-bucket-20261127).
TEST(FabricScript, ThePeakBucketHoldsTheTimersSlackOnTopOfAFrame) {
  // 100 us at 1010 Mbit/s = 12625 bytes; the bucket of 2 ms (250000 bytes) stays.
  EXPECT_EQ(joined(shaper_arguments("L1", 1000, 9000, 100)),
            "qdisc replace dev L1 root tbf rate 1000000000bit burst 250000 limit 250000000 "
            "peakrate 1010000000bit mtu 21689 ");
  // At 20 Mbit/s the slack is 253 bytes: a cable sends hardly faster after an idle spell.
  EXPECT_NE(joined(shaper_arguments("L1", 20, 9000, 100)).find("mtu 9317 "), std::string::npos);
  // tbf refuses a peak bucket larger than the token bucket: the token bucket grows with it.
  EXPECT_EQ(joined(shaper_arguments("L1", 10, 9000, 10000)),
            "qdisc replace dev L1 root tbf rate 10000000bit burst 21689 limit 16777216 "
            "peakrate 10100000bit mtu 21689 ");
}

// NICs named `alias`, `help`, `name`, `netns`, `dev`, `up` reached
// `ip` where it reads keywords (`link add alias netns ...` made a link in the machine's own
// namespace). Every interface now follows `name`, `peer name` or `dev`; names the kernel
// keeps for itself (`all`, `default` in /proc/sys/net/ipv4/conf) are not given.
TEST(FabricScript, NoInterfaceNameIsWhereIpReadsAKeyword) {
  const auto t = topo::load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/tests/data/fabric/keyword_names.json");
  const FabricPlan plan = plan_fabric(t, {});
  std::set<std::string> interfaces;
  for (const auto& ns : plan.namespaces)
    for (const auto& dev : ns.interfaces) {
      interfaces.insert(dev);
      EXPECT_NE(dev, "all");
      EXPECT_NE(dev, "default");
    }
  for (const char* keyword : {"alias", "help", "name", "netns", "dev", "up"})
    EXPECT_TRUE(interfaces.count(keyword)) << keyword << " kept as the file names it";
  // `ip link add|set|del` read a bare word after the verb as options first: the interface
  // must follow `name` (add, and a veth's peer) or `dev` (set, del).
  auto check = [&](const std::string& batch, const std::string& what) {
    std::istringstream lines(batch);
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream words(line);
      std::vector<std::string> w;
      for (std::string x; words >> x;) w.push_back(x);
      if (w.size() < 4 || w[0] != "link") continue;
      if (w[1] == "add") {  // link add name X ... [peer name Y ...]
        EXPECT_EQ(w[2], "name") << what << ": " << line;
        for (size_t k = 0; k + 1 < w.size(); ++k)
          if (w[k] == "peer") {
            EXPECT_EQ(w[k + 1], "name") << what << ": " << line;
          }
      } else {  // link set|del dev X ...
        EXPECT_EQ(w[2], "dev") << what << ": " << line;
      }
    }
  };
  // Each cable's line, whole: a name that is a keyword cannot shift the words after it.
  const std::string root = root_batch(plan);
  for (const auto& c : plan.cables)
    EXPECT_NE(root.find("link add name " + c.a.interface + " netns " + plan.namespaces[c.a.ns].name +
                        " type veth peer name " + c.b.interface + " netns " + plan.namespaces[c.b.ns].name + "\n"),
              std::string::npos)
        << c.name << "\n" << root;
  check(root, "root batch");
  for (int i = 0; i < int(plan.namespaces.size()); ++i) {
    const NamespaceScript s = namespace_script(plan, i);
    check(s.links + s.rules + s.routes, plan.namespaces[i].name);
    check(s.shapers, plan.namespaces[i].name + " shapers");
  }
}

}  // namespace
}  // namespace topocoll::fabric
