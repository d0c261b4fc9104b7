// load -> save -> load round-trips for every example and for generated shapes.
#include <gtest/gtest.h>

#include <filesystem>

#include "topo/generators.h"
#include "topo/topology_json.h"

namespace topocoll::topo {
namespace {

// Structural equality, field by field: what the rest of topocoll reads.
void expect_same(const Topology& a, const Topology& b) {
  EXPECT_EQ(a.kind(), b.kind());
  EXPECT_EQ(a.name(), b.name());
  ASSERT_EQ(a.endpoints().size(), b.endpoints().size());
  for (size_t i = 0; i < a.endpoints().size(); ++i) {
    const Endpoint &x = a.endpoints()[i], &y = b.endpoints()[i];
    EXPECT_EQ(x.id, y.id);
    EXPECT_EQ(x.host, y.host);
    EXPECT_EQ(x.gpu, y.gpu);
    EXPECT_EQ(x.nic, y.nic);
    EXPECT_EQ(x.host_index, y.host_index);
    EXPECT_EQ(x.attach_switch, y.attach_switch);
    EXPECT_EQ(x.package, y.package);
    EXPECT_EQ(x.node, y.node);
  }
  ASSERT_EQ(a.switches().size(), b.switches().size());
  for (size_t i = 0; i < a.switches().size(); ++i) {
    EXPECT_EQ(a.switches()[i].id, b.switches()[i].id);
    EXPECT_EQ(a.switches()[i].role, b.switches()[i].role);
    EXPECT_EQ(a.switches()[i].ports, b.switches()[i].ports);
    EXPECT_DOUBLE_EQ(a.switches()[i].latency_us, b.switches()[i].latency_us);
  }
  ASSERT_EQ(a.links().size(), b.links().size());
  for (size_t i = 0; i < a.links().size(); ++i) {
    const Link &x = a.links()[i], &y = b.links()[i];
    EXPECT_EQ(x.from, y.from);
    EXPECT_EQ(x.to, y.to);
    EXPECT_EQ(x.kind, y.kind);
    EXPECT_DOUBLE_EQ(x.gbps, y.gbps);
    EXPECT_DOUBLE_EQ(x.latency_us, y.latency_us);
    EXPECT_EQ(x.reverse, y.reverse);
  }
  ASSERT_EQ(a.hosts().size(), b.hosts().size());
  for (size_t i = 0; i < a.hosts().size(); ++i) {
    EXPECT_EQ(a.hosts()[i].name, b.hosts()[i].name);
    EXPECT_EQ(a.hosts()[i].endpoints, b.hosts()[i].endpoints);
    EXPECT_EQ(a.hosts()[i].fabric, b.hosts()[i].fabric);
    EXPECT_EQ(a.hosts()[i].fabric_switch, b.hosts()[i].fabric_switch);
  }
  EXPECT_EQ(a.torus_dims(), b.torus_dims());
  EXPECT_EQ(a.nodes_per_package(), b.nodes_per_package());
  EXPECT_EQ(a.local_switches(), b.local_switches());
  EXPECT_EQ(a.switches_per_group(), b.switches_per_group());
}

void expect_round_trip(const Topology& t) {
  nlohmann::json saved = topology_to_json(t);
  Topology again = topology_from_json(saved);
  expect_same(t, again);
  EXPECT_EQ(topology_to_json(again), saved);
  // The text for people parses back to the same document.
  EXPECT_EQ(nlohmann::json::parse(topology_json_text(saved)), saved);
}

class Example : public ::testing::TestWithParam<std::string> {};

TEST_P(Example, RoundTrips) {
  Topology t = load_topology_file(std::string(TOPOCOLL_SOURCE_DIR) + "/examples/" + GetParam());
  expect_round_trip(t);
}

INSTANTIATE_TEST_SUITE_P(TopoExamples, Example,
                         ::testing::Values("bigraph-32.json", "bigraph-16x8.json", "nap-4x8.json",
                                           "nap-16x8.json"),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.find('.'));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(TopoRoundTrip, EveryExampleIsListed) {
  int count = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(TOPOCOLL_SOURCE_DIR) + "/examples"))
    count += entry.path().extension() == ".json";
  EXPECT_EQ(count, 4);
}

TEST(TopoRoundTrip, GeneratedBiGraphShapes) {
  for (const char* spread : {"alternate", "upper-first", "single"})
    for (int gpus : {1, 2, 4, 8}) {
      BiGraphShape s;
      s.switches_per_group = 4;
      s.endpoints_per_switch = 8;
      s.gpus_per_server = gpus;
      s.nic_spread = spread;
      if (std::string(spread) == "upper-first" && gpus == 1) continue;  // odd: rejected
      SCOPED_TRACE(std::string(spread) + " " + std::to_string(gpus));
      expect_round_trip(generate_bigraph(s));
    }
}

TEST(TopoRoundTrip, GeneratedNapShapes) {
  for (auto torus : std::vector<std::vector<int>>{{1}, {2}, {3}, {2, 2}, {3, 4}, {2, 2, 2}}) {
    NapShape s;
    s.torus = torus;
    s.packages = 1;
    for (int d : torus) s.packages *= d;
    s.nodes_per_package = 4;
    s.local_switches = 2;
    s.gpus_per_host = 2;
    expect_round_trip(generate_nap(s));
  }
}

TEST(TopoRoundTrip, ExplicitIdsAndPartialLinksSurvive) {
  const char* text = R"({
    "kind": "bigraph", "name": "custom", "link_gbps": 200, "link_latency_us": 2,
    "switches": {"upper": ["A", "B"], "lower": ["C", "D"]},
    "links": [["A", "C"], ["B", "C"], ["B", "D"]],
    "servers": [
      {"name": "h0", "nics": [{"name": "mlx5_0", "gpu": 0, "switch": "A", "id": "gpu-a"},
                              {"name": "mlx5_1", "gpu": 1, "switch": "D"}]},
      {"name": "h1", "fabric": {"kind": "pcie", "gbps": 256, "latency_us": 2},
       "nics": [{"name": "mlx5_0", "gpu": 0, "switch": "D"}]}]})";
  Topology t = load_topology_text(text);
  EXPECT_EQ(t.endpoints()[0].id, "gpu-a");
  EXPECT_EQ(t.endpoints()[1].id, "h0.g1");
  EXPECT_EQ(t.hosts()[1].fabric, HostFabricKind::PCIe);
  nlohmann::json saved = topology_to_json(t);
  EXPECT_EQ(saved["links"].size(), 3u);
  EXPECT_EQ(saved["servers"][1]["fabric"]["kind"], "pcie");
  expect_round_trip(t);
  // A (upper) to D (lower) has no direct cable: the route falls back to the shortest path
  // A-C-B-D, which still alternates groups.
  auto paths = t.route(0, 2);
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(paths[0].links.size(), 5u);
}

TEST(TopoRoundTrip, ShapeFormEqualsGenerator) {
  Topology from_file = load_topology_text(
      R"({"kind": "nap", "name": "n", "shape": {"torus": [2, 3], "nodes_per_package": 4,
          "local_switches": 2, "gpus_per_host": 4}})");
  NapShape s;
  s.name = "n";
  s.torus = {2, 3};
  s.packages = 6;
  s.nodes_per_package = 4;
  s.local_switches = 2;
  s.gpus_per_host = 4;
  expect_same(from_file, generate_nap(s));
}

}  // namespace
}  // namespace topocoll::topo
