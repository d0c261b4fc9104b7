// Localisation on synthetic measurements: the flows of a real round plan, each measured at
// the rate of its slowest cable under a hidden fault; the finding must name that cable and
// only it.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <numeric>

#include "accept/localization.h"
#include "topo/cable_names.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::accept {
namespace {

using testing_support::example_topology;

// Measurements of every planned flow when link l runs at factor[l] of its rate (0 = dead).
std::vector<FlowMeasurement> measure(const topo::Topology& t, const std::map<int, double>& factor,
                                     std::vector<int> present = {}) {
  if (present.empty()) {
    present.resize(t.endpoints().size());
    std::iota(present.begin(), present.end(), 0);
  }
  std::vector<FlowMeasurement> out;
  static std::map<std::pair<std::string, std::vector<int>>, RoundPlan> plans;  // deterministic
  const auto key = std::make_pair(t.name(), present);
  if (!plans.count(key)) plans[key] = plan_flow_rounds(t, present, 3);
  const RoundPlan& plan = plans[key];
  for (size_t r = 0; r < plan.rounds.size(); ++r)
    for (const auto& f : plan.rounds[r].flows) {
      FlowMeasurement m;
      m.flow = f;
      m.round = int(r);
      double expected = 1e9, got = 1e9;
      for (int l : f.links) {
        expected = std::min(expected, t.links()[l].gbps);
        const auto it = factor.find(l);
        got = std::min(got, t.links()[l].gbps * (it == factor.end() ? 0.97 : it->second));
      }
      m.expected_gbps = expected;
      m.measured_gbps = got;
      m.dead = got == 0;
      out.push_back(m);
    }
  return out;
}

int link(const topo::Topology& t, const std::string& name) { return topo::find_cable(t, name).link; }

TEST(Localization, HealthyNetworkHasNoFinding) {
  const auto t = example_topology("bigraph-32.json");
  const auto loc = localize(t, measure(t, {}), 0.8);
  EXPECT_TRUE(loc.findings.empty());
  for (int l : topo::cable_links(t)) EXPECT_EQ(loc.links[l].state, CableState::Ok);
}

TEST(Localization, OneDegradedInterGroupCableIsNamedAloneAndCertain) {
  const auto t = example_topology("bigraph-32.json");
  const int ab = link(t, "U1-L2");
  const int ba = t.links()[ab].reverse;
  const auto loc = localize(t, measure(t, {{ab, 0.25}, {ba, 0.25}}), 0.8);
  ASSERT_EQ(loc.findings.size(), 1u);
  EXPECT_EQ(loc.findings[0].kind, "slow cable");
  EXPECT_EQ(loc.findings[0].links, (std::vector<int>{ab, ba}));
  EXPECT_EQ(loc.findings[0].certainty, "certain");
  EXPECT_NEAR(loc.findings[0].ratio, 0.25, 1e-9);
  EXPECT_NE(loc.findings[0].detail.find("U1-L2"), std::string::npos) << loc.findings[0].detail;
}

// Exhaustively: whichever single cable is slow, in one direction or both, the plan's flows
// name that cable alone, with certainty.
TEST(Localization, EverySingleSlowCableOfTheExamplesIsNamedAloneAndCertain) {
  for (const char* file : {"bigraph-32.json", "nap-4x8.json"}) {
    const auto t = example_topology(file);
    for (int l : topo::cable_links(t))
      for (bool both : {false, true}) {
        std::map<int, double> slow = {{l, 0.25}};
        if (both) slow[t.links()[l].reverse] = 0.25;
        const auto loc = localize(t, measure(t, slow), 0.8);
        std::string all;
        for (const auto& f : loc.findings) all += f.kind + ": " + f.detail + " [" + f.certainty + "]\n";
        ASSERT_EQ(loc.findings.size(), 1u) << file << " " << topo::link_name(t, l) << (both ? " both ways\n" : "\n") << all;
        std::vector<int> want = {l};
        if (both) want.push_back(t.links()[l].reverse);
        EXPECT_EQ(loc.findings[0].links, want) << loc.findings[0].detail;
        EXPECT_EQ(loc.findings[0].certainty, "certain") << loc.findings[0].detail;
      }
  }
}

TEST(Localization, OneDirectionIsNamedAsThatDirection) {
  const auto t = example_topology("bigraph-32.json");
  const int ab = link(t, "U3->L0");
  const auto loc = localize(t, measure(t, {{ab, 0.5}}), 0.8);
  ASSERT_EQ(loc.findings.size(), 1u);
  EXPECT_EQ(loc.findings[0].links, std::vector<int>{ab});
  EXPECT_NE(loc.findings[0].detail.find("U3->L0"), std::string::npos);
}

TEST(Localization, ACutAccessCableNamesItsEndpoint) {
  const auto t = example_topology("bigraph-32.json");
  const int up = link(t, "s9.g0-L1");
  const auto loc = localize(t, measure(t, {{up, 0}, {t.links()[up].reverse, 0}}), 0.8);
  ASSERT_EQ(loc.findings.size(), 1u);
  EXPECT_EQ(loc.findings[0].kind, "unreachable endpoint");
  EXPECT_EQ(loc.findings[0].endpoints, std::vector<int>{*t.find_endpoint_by_id("s9.g0")});
  EXPECT_NE(loc.findings[0].detail.find("s9.g0-L1"), std::string::npos);
}

TEST(Localization, NapLocalSwitchPortAndTorusCable) {
  const auto t = example_topology("nap-4x8.json");
  const int port = link(t, "p1.n3->p1.s2");
  const int torus = link(t, "p0.n6-p2.n6");
  const auto loc = localize(t, measure(t, {{port, 0.2}, {torus, 0.3}, {t.links()[torus].reverse, 0.3}}), 0.8);
  std::set<std::string> named;
  for (const auto& f : loc.findings) {
    EXPECT_EQ(f.certainty, "certain") << f.detail;
    named.insert(f.detail.substr(0, f.detail.find(':')));
  }
  EXPECT_EQ(named, (std::set<std::string>{"p1.n3->p1.s2", "p0.n6-p2.n6"}));
}

// A cut cable kills the flows whose way back crosses it too (TCP's handshake and ACKs take
// the receiver's route, on NAP through other cables than the way there): the cut cable is
// named, dead, and no healthy cable is named for the flows it killed that way.
TEST(Localization, ACutTorusCableIsNamedFromTheFlowsItsAcksKilledToo) {
  const auto t = example_topology("nap-4x8.json");
  const int cut = link(t, "p0.n6-p2.n6");
  const std::set<int> dead_links = {cut, t.links()[cut].reverse};
  auto flows = measure(t, {{cut, 0}, {t.links()[cut].reverse, 0}});
  int killed_by_acks = 0;
  for (auto& m : flows) {
    if (m.dead) continue;
    for (const auto& path : t.route(m.flow.dst, m.flow.src))
      for (int l : path.links)
        if (dead_links.count(l) && !m.dead) {
          m.dead = true;
          m.measured_gbps = 0;
          ++killed_by_acks;
        }
  }
  ASSERT_GT(killed_by_acks, 0) << "no flow's way back crosses the cut cable: the case tests nothing";
  const auto loc = localize(t, flows, 0.8);
  std::string all;
  for (const auto& f : loc.findings) all += f.kind + ": " + f.detail + " [" + f.certainty + "]\n";
  ASSERT_FALSE(loc.findings.empty()) << all;
  bool named = false;
  for (const auto& f : loc.findings) {
    EXPECT_NE(f.kind, "unexplained") << all;
    if (f.kind == "dead cable" && f.detail.rfind("p0.n6-p2.n6", 0) == 0) {
      named = true;
    } else if (f.kind == "dead cable") {
      EXPECT_NE(f.certainty, "certain") << "a healthy cable named for certain:\n" << all;
    }
  }
  EXPECT_TRUE(named) << all;
}

// A sender whose socket mark was refused (no CAP_NET_ADMIN) or whose bind failed never put a
// packet on a cable: its host is named with the error, no cable is, and the cables only its
// flows would have crossed stay unmeasured.
TEST(Localization, FlowsThatFailedOnTheirOwnHostNameTheHostNotACable) {
  const auto t = example_topology("nap-4x8.json");
  auto flows = measure(t, {});
  const int host = *t.find_endpoint_by_id("p1.n3");
  int failed = 0;
  for (auto& m : flows)
    if (m.flow.src == host) {
      m.dead = true;
      m.measured_gbps = 0;
      m.local_error = true;
      m.error = "SO_MARK (needs CAP_NET_ADMIN): Operation not permitted";
      ++failed;
    }
  ASSERT_GT(failed, 0);
  const auto loc = localize(t, flows, 0.8);
  std::string all;
  for (const auto& f : loc.findings) all += f.kind + ": " + f.detail + "\n";
  ASSERT_EQ(loc.findings.size(), 1u) << all;
  EXPECT_EQ(loc.findings[0].kind, "local error");
  EXPECT_EQ(loc.findings[0].endpoints, std::vector<int>{host});
  EXPECT_NE(loc.findings[0].detail.find("p1.n3 could not start " + std::to_string(failed) +
                                        " flows on its own host: SO_MARK (needs CAP_NET_ADMIN)"),
            std::string::npos)
      << all;
  const int up = link(t, "p1.n3->p1.s0");
  EXPECT_EQ(loc.links[up].flows, 0);
}

TEST(Localization, CablesNoFlowSeparatesAreNamedTogether) {
  // Two endpoints only: every flow crosses both access cables of each, so a slow cable
  // cannot be told from the others.
  const auto t = example_topology("bigraph-32.json");
  const int up = link(t, "s0.g0->U0");
  const auto loc = localize(t, measure(t, {{up, 0.3}}, {0, 1}), 0.8);
  ASSERT_FALSE(loc.findings.empty());
  EXPECT_NE(loc.findings[0].certainty.find("no flow separates"), std::string::npos)
      << loc.findings[0].certainty;
}

TEST(Localization, SlowFlowOverClearedCablesIsUnexplained) {
  const auto t = example_topology("bigraph-32.json");
  auto flows = measure(t, {});
  flows[3].measured_gbps = flows[3].expected_gbps * 0.4;  // met another flow somewhere
  const auto loc = localize(t, flows, 0.8);
  ASSERT_EQ(loc.unexplained_flows, std::vector<int>{3});
  EXPECT_EQ(loc.findings.back().kind, "unexplained");
}

}  // namespace
}  // namespace topocoll::accept
