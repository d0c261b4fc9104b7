// The one topology fingerprint: equal for the same network however its file is laid out,
// different when anything a decision reads differs.
#include <gtest/gtest.h>

#include <string>

#include "topo/topology_fingerprint.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::topo {
namespace {

using testing_support::example_path;

TEST(TopologyFingerprint, SameNetworkSameFingerprintWhateverTheLayout) {
  const Topology t = load_topology_file(example_path("bigraph-32"));
  const uint64_t f = topology_fingerprint(t);
  EXPECT_NE(f, 0u);
  const nlohmann::json doc = topology_to_json(t);
  EXPECT_EQ(topology_fingerprint(load_topology_text(doc.dump())), f);
  EXPECT_EQ(topology_fingerprint(load_topology_text(doc.dump(7))), f);
  EXPECT_EQ(topology_fingerprint(load_topology_text(topology_json_text(doc))), f);
}

TEST(TopologyFingerprint, AnyChangeADecisionReadsChangesIt) {
  const Topology t = load_topology_file(example_path("nap-4x8"));
  const uint64_t f = topology_fingerprint(t);
  nlohmann::json renamed = topology_to_json(t);
  renamed["name"] = "another-name";
  EXPECT_NE(topology_fingerprint(topology_from_json(renamed)), f);
  EXPECT_NE(topology_fingerprint(load_topology_file(example_path("nap-16x8"))), f);
  EXPECT_NE(topology_fingerprint(load_topology_file(example_path("bigraph-32"))),
            topology_fingerprint(load_topology_file(example_path("bigraph-16x8"))));
  // A link speed: the cost model would choose differently.
  const std::string text = topology_to_json(t).dump();
  const std::size_t at = text.find("\"gbps\":");
  ASSERT_NE(at, std::string::npos) << text.substr(0, 200);
  std::string faster = text;
  faster.insert(at + 7, "1");  // "gbps":400 -> "gbps":1400
  EXPECT_NE(topology_fingerprint(load_topology_text(faster)), f);
}

}  // namespace
}  // namespace topocoll::topo
