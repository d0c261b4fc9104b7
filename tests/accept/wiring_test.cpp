// Wiring analysis on synthetic path probes: a swap is named as one, responders are found by
// majority where no address is known, and missing answers are no deviation.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include "accept/path_probe.h"
#include "accept/wiring.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::accept {
namespace {

using testing_support::example_topology;

// The probe of flow a->b as the network answers it: each node answers from "addr:<id>";
// `detour` replaces the node reached over a given link.
PathObservation probe(const topo::Topology& t, const std::string& a, const std::string& b,
                      const std::map<int, std::string>& detour = {}) {
  PathObservation o;
  o.flow.src = *t.find_endpoint_by_id(a);
  o.flow.dst = *t.find_endpoint_by_id(b);
  o.flow.links = flow_links(t, o.flow.src, o.flow.dst, -1);
  for (int l : o.flow.links) {
    const auto it = detour.find(l);
    o.trace.responders.push_back("addr:" + (it != detour.end() ? it->second : t.node_id(t.links()[l].to)));
    if (it != detour.end()) break;
  }
  o.trace.reached = detour.empty();
  return o;
}

TEST(Wiring, HealthyProbesShowNoDeviationAndIdentifyResponders) {
  const auto t = example_topology("bigraph-32");
  std::vector<PathObservation> obs;
  for (int i = 0; i < 32; i += 3) obs.push_back(probe(t, "s" + std::to_string(i) + ".g0", "s" + std::to_string((i * 7 + 5) % 32) + ".g0"));
  const auto w = analyze_wiring(t, obs, {});
  EXPECT_TRUE(w.findings.empty());
  EXPECT_EQ(w.hops_answered, w.hops_expected);
  EXPECT_EQ(w.node_of_address.at("addr:U0"), "U0");
}

TEST(Wiring, SwappedFarEndsAreNamedAsASwap) {
  const auto t = example_topology("bigraph-32");
  const int u0l0 = topo::find_cable(t, "U0->L0").link, u0l1 = topo::find_cable(t, "U0->L1").link;
  std::vector<PathObservation> obs;
  // Many probes the right way (they fix who answers from where), a few through the swap.
  for (int i = 0; i < 32; ++i)
    for (int j : {1, 9, 17, 25})
      if (i % 8 != 0 && i != j) obs.push_back(probe(t, "s" + std::to_string(i) + ".g0", "s" + std::to_string(j) + ".g0"));
  obs.push_back(probe(t, "s0.g0", "s1.g0", {{u0l0, "L1"}}));
  obs.push_back(probe(t, "s2.g0", "s3.g0", {{u0l0, "L1"}}));
  obs.push_back(probe(t, "s0.g0", "s9.g0", {{u0l1, "L0"}}));
  const auto w = analyze_wiring(t, obs, {});
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_EQ(w.findings[0].links, (std::vector<int>{std::min(u0l0, u0l1), std::max(u0l0, u0l1)}));
  EXPECT_EQ(w.findings[0].probes, 3);
  EXPECT_NE(w.findings[0].detail.find("look swapped"), std::string::npos) << w.findings[0].detail;
}

TEST(Wiring, KnownAddressesWinAndSilenceIsNoDeviation) {
  const auto t = example_topology("bigraph-32");
  auto o = probe(t, "s0.g0", "s9.g0");
  o.trace.responders[1] = "";  // that hop did not answer
  const int l1 = t.graph_node({topo::NodeRef::Type::Switch, *t.find_switch("L1")});
  auto w = analyze_wiring(t, {o}, {{"addr:L1", l1}});
  EXPECT_TRUE(w.findings.empty());
  EXPECT_EQ(w.hops_answered, 2);
  // A single probe answered by L2 where L1 was expected, L2's address known: a miswire.
  auto wrong = probe(t, "s0.g0", "s9.g0", {{topo::find_cable(t, "U0->L1").link, "L2"}});
  const int l2 = t.graph_node({topo::NodeRef::Type::Switch, *t.find_switch("L2")});
  w = analyze_wiring(t, {wrong}, {{"addr:L2", l2}});
  ASSERT_EQ(w.findings.size(), 1u);
  EXPECT_NE(w.findings[0].detail.find("U0's port the file cables to L1 (U0-L1) reaches L2"), std::string::npos)
      << w.findings[0].detail;
}

// A probe of a striped flow whose lane mark the kernel refuses (no CAP_NET_ADMIN) is not
// sent unmarked, where it would take the default lane and its first deviation would read as
// miswiring: no responders, and the reason. In a child without root's privileges.
TEST(PathProbe, AMarkTheKernelRefusesSendsNoProbe) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::geteuid() == 0 && ::setuid(65534) != 0) ::_exit(2);
    const PathTrace t = trace_path("127.0.0.1", "127.0.0.1", 0x105, 2, std::chrono::milliseconds(50));
    ::_exit(t.responders.empty() && t.error.rfind("SO_MARK (needs CAP_NET_ADMIN)", 0) == 0 ? 0 : 1);
  }
  int st = 0;
  ASSERT_EQ(::waitpid(pid, &st, 0), pid);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0) << "1: the probe went out unmarked, or said nothing; 2: could not drop root";
}

}  // namespace
}  // namespace topocoll::accept
