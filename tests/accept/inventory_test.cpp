// Inventory matching: every way a job can differ from its file is named, and the ranks that
// can be measured are kept.
#include <gtest/gtest.h>

#include "accept/inventory.h"
#include "topo/topology_json.h"
#include "tests/common/examples.h"

namespace topocoll::accept {
namespace {

using testing_support::example_topology;

RankIdentity rank_on(int rank, const std::string& host, int gpu = 0, const std::string& address = "10.1.0.1") {
  RankIdentity r;
  r.rank = rank;
  r.host = host;
  r.gpu = gpu;
  r.address = address;
  return r;
}

TEST(Inventory, AFullJobMatchesEveryEndpoint) {
  const auto t = example_topology("bigraph-32");
  std::vector<RankIdentity> ranks;
  for (int i = 0; i < 32; ++i) ranks.push_back(rank_on(i, "s" + std::to_string(31 - i)));
  const auto m = match_inventory(t, ranks, {});
  EXPECT_TRUE(m.ok());
  EXPECT_EQ(m.present.size(), 32u);
  EXPECT_EQ(m.endpoint_of_rank[0], *t.find_endpoint_by_id("s31.g0"));
}

TEST(Inventory, EveryKindOfMismatchIsNamed) {
  const auto t = example_topology("bigraph-32");
  std::vector<RankIdentity> ranks = {rank_on(0, "s0"), rank_on(1, "s1"), rank_on(2, "intruder"),
                                     rank_on(3, "s3", 2), rank_on(4, "s1"), rank_on(5, "s5", 0, "")};
  ranks[5].address_source = "no interface named nic0";
  const auto m = match_inventory(t, ranks, {0, 1, 3, 5, 6});
  std::map<std::string, std::string> by_kind;
  for (const auto& p : m.problems) by_kind[p.kind] += p.detail + "\n";
  EXPECT_NE(by_kind["extra host"].find("'intruder'"), std::string::npos);
  EXPECT_NE(by_kind["unknown GPU"].find("GPU 2 of s3, but the topology places GPUs 0 there"), std::string::npos)
      << by_kind["unknown GPU"];
  EXPECT_NE(by_kind["duplicate"].find("ranks 1 and 4 both stand for s1.g0"), std::string::npos);
  EXPECT_NE(by_kind["no NIC address"].find("no interface named nic0"), std::string::npos);
  // Expected s0, s1, s3, s5, s6: s3 (unknown GPU) and s6 have no usable rank; s5 has a rank
  // without an address: present in the job but not measurable.
  EXPECT_NE(by_kind["missing"].find("s3.g0"), std::string::npos);
  EXPECT_NE(by_kind["missing"].find("s6.g0"), std::string::npos);
  EXPECT_EQ(by_kind["missing"].find("s5.g0"), std::string::npos);
  EXPECT_EQ(m.present, (std::vector<int>{0, 1}));
  EXPECT_EQ(m.endpoint_of_rank, (std::vector<int>{0, 1, -1, -1, -1, -1}));
}

TEST(Inventory, IdentityRoundTripsThroughJson) {
  RankIdentity r = rank_on(7, "s7", 1);
  r.interfaces = {{"nic0", "10.1.0.8"}, {"mgmt0", "172.16.0.9"}};
  r.flow_port = 4242;
  const auto back = identity_from_json(identity_json(r));
  EXPECT_EQ(back.host, "s7");
  EXPECT_EQ(back.interfaces, r.interfaces);
  EXPECT_EQ(back.flow_port, 4242);
  EXPECT_THROW(identity_from_json(nlohmann::json{{"rank", "x"}}), std::runtime_error);
}

// A rank's NIC address is resolved as the net plugin resolves it: TOPOCOLL_NET_PLANE_ADDRS
// first (nic0 of s0 in bigraph-32 at an address no interface has). In a child that reads the
// process's settings afresh (they are read once per process).
TEST(InventoryDeathTest, PlaneAddressesNameTheNicsAddressAsForTheNetPlugin) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const topo::Topology t = example_topology("bigraph-32.json");
  EXPECT_EXIT(
      {
        ::setenv("TOPOCOLL_NET_PLANE_ADDRS", "nic0=10.77.0.7", 1);
        ::setenv("TOPOCOLL_HOSTNAME", "s0", 1);
        const RankIdentity r = describe_this_rank(0, 0, "", t);
        std::exit(r.address == "10.77.0.7" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace topocoll::accept
