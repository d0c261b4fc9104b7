// The init path with a topology configured, against the stub libnccl: every communicator
// creation runs the identity exchange (one ncclAllGather of 128-byte records in its own NCCL
// group), deferred to the outermost ncclGroupEnd when created inside a group. The stub
// moves no data (and CI has no GPU), so the exchange cannot agree: the communicator must
// fall back to NCCL with a WARN and keep forwarding, never hang or fail the user's call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

#include "plugin/interposer/comm_state.h"
#include "tests/interposer/stub_nccl.h"
#include "topo/generators.h"
#include "topo/topology_json.h"

namespace topocoll::plugin::interposer {
namespace {

// The configuration is read once per process: set it up before any test touches it.
const std::string kTopologyPath = [] {
  const std::string path = std::string(TOPOCOLL_BINARY_DIR) + "/interposer_init_topology.json";
  topo::BiGraphShape shape;
  shape.switches_per_group = 1;
  shape.endpoints_per_switch = 2;
  shape.gpus_per_server = 1;
  std::ofstream(path) << topo::topology_to_json(topo::generate_bigraph(shape)).dump();
  setenv("TOPOCOLL_TOPO_FILE", path.c_str(), 1);
  setenv("NCCL_HOSTID", "s1", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  return path;
}();

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& c : stub_nccl::calls()) out.push_back(c.fn);
  return out;
}

TEST(InitExchange, RunsAtCreationAndFallsBackWhenItCannotAgree) {
  stub_nccl::reset();
  stub_nccl::set_comm_shape(4, 1, 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, 4, id, 1), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto n = names();
  ASSERT_GE(n.size(), 3u);
  EXPECT_EQ(n[0], "pncclCommInitRank");
  EXPECT_EQ(n[1], "pncclGroupStart");  // the exchange's own group
  EXPECT_EQ(n.back(), "pncclGroupEnd");
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_FALSE(st->fallback_reason.empty());
  EXPECT_NE(err.find("falls back to NCCL"), std::string::npos) << err;
  // Calls keep reaching NCCL unchanged.
  stub_nccl::reset();
  char buf[64] = {};
  ASSERT_EQ(ncclAllReduce(buf, buf + 32, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(names(), std::vector<std::string>{"pncclAllReduce"});
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
}

TEST(InitExchange, CreationInsideAGroupExchangesAfterTheOutermostEnd) {
  stub_nccl::reset();
  stub_nccl::set_comm_shape(4, 2, 0);
  ncclComm_t a = nullptr, b = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&a, 4, id, 2), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&b, 4, id, 2), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  // Still inside the outer group: nothing exchanged, nothing registered yet.
  EXPECT_EQ(CommRegistry::instance().find(a), nullptr);
  EXPECT_EQ(names(), (std::vector<std::string>{"pncclGroupStart", "pncclCommInitRank", "pncclGroupStart",
                                                "pncclCommInitRank", "pncclGroupEnd"}));
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  const auto n = names();
  // NCCL's group closed first, then one exchange group for both communicators.
  ASSERT_GE(n.size(), 8u);
  EXPECT_EQ(n[5], "pncclGroupEnd");
  EXPECT_EQ(n[6], "pncclGroupStart");
  EXPECT_EQ(n.back(), "pncclGroupEnd");
  EXPECT_EQ(std::count(n.begin() + 6, n.end(), std::string("pncclGroupStart")), 1);
  ASSERT_NE(CommRegistry::instance().find(a), nullptr);
  ASSERT_NE(CommRegistry::instance().find(b), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(a)->served);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  ASSERT_EQ(ncclCommDestroy(a), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(b), ncclSuccess);
}

TEST(InitExchange, NonBlockingCommunicatorsSkipTheExchange) {
  stub_nccl::reset();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 4, id, 1, &config), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(names(), std::vector<std::string>{"pncclCommInitRankConfig"});
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_FALSE(st->blocking);
  // A split without a config inherits non-blocking: no exchange either.
  ncclComm_t child = nullptr;
  stub_nccl::reset();
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommSplit(comm, 0, 1, &child, nullptr), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(names(), std::vector<std::string>{"pncclCommSplit"});
  ASSERT_NE(CommRegistry::instance().find(child), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(child)->blocking);
  ASSERT_EQ(ncclCommDestroy(child), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
