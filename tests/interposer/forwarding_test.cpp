// The interposer's entry points against the stub libnccl: every call topocoll does not take
// reaches NCCL's pnccl* symbol exactly once with the user's arguments; communicators are
// registered and released; groups are forwarded with their nesting intact.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/group_streams.h"
#include "plugin/interposer/interposer.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/call_route_cache.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/interposer/ring_comm.h"
#include "plugin/split_placements.h"
#include "sched/generator.h"
#include "sched/placement.h"
#include "tests/common/failing_allocation.h"
#include "tests/interposer/stub_nccl.h"
#include "topo/generators.h"

namespace topocoll::plugin::interposer {
namespace {

using stub_nccl::Call;

// WARNs go to stderr, where tests read them; the environment is read once per process.
[[maybe_unused]] const int kWarnsToStderr = setenv("NCCL_DEBUG", "WARN", 1);

class Forwarding : public ::testing::Test {
 protected:
  void SetUp() override {
    stub_nccl::reset();
    stub_nccl::set_comm_shape(4, 1, 0);
  }
  static std::vector<Call> calls_named(const char* fn) {
    std::vector<Call> out;
    for (const Call& c : stub_nccl::calls())
      if (c.fn == fn) out.push_back(c);
    return out;
  }
  // The allreduces NCCL got but topocoll's votes (one ncclInt32 ncclMin element each).
  static std::vector<Call> user_allreduces() {
    std::vector<Call> out;
    for (const Call& c : calls_named("pncclAllReduce"))
      if (!(c.count == 1 && c.datatype == int(ncclInt32) && c.op == int(ncclMin))) out.push_back(c);
    return out;
  }
};

// Rank 3 of 8 on a small BiGraph, served (as the init exchange would leave it on a GPU); or
// on `topology`'s `endpoints` when given.
CommState* insert_served_state(ncclComm_t comm, std::shared_ptr<const topo::Topology> topology = nullptr,
                               std::vector<int> endpoints = {}) {
  if (!topology) {
    topo::BiGraphShape shape;
    shape.switches_per_group = 2;
    shape.endpoints_per_switch = 2;
    topology = std::make_shared<const topo::Topology>(topo::generate_bigraph(shape));
  }
  auto st = std::make_unique<CommState>();
  st->comm = comm;
  st->nranks = 8;
  st->rank = 3;
  st->device = 0;
  st->topology = topology;
  st->placement = endpoints.empty() ? sched::first_endpoints(*topology, 8)
                                    : sched::explicit_endpoints(*topology, std::move(endpoints));
  st->min_compute_capability = 90;  // an H100's
  st->served = true;
  CommState* raw = st.get();
  CommRegistry::instance().insert(std::move(st));
  return raw;
}

ncclComm_t fake_comm(uintptr_t v) { return reinterpret_cast<ncclComm_t>(v); }
cudaStream_t fake_stream(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

TEST_F(Forwarding, CollectivesOnForeignCommunicatorsReachNcclUnchanged) {
  char in[64] = {}, out[256] = {};
  ASSERT_EQ(ncclAllReduce(in, out, 17, ncclFloat16, ncclMax, fake_comm(0x10), fake_stream(0x20)), ncclSuccess);
  ASSERT_EQ(ncclReduceScatter(in, out, 5, ncclInt64, ncclAvg, fake_comm(0x11), fake_stream(0x21)), ncclSuccess);
  ASSERT_EQ(ncclAllGather(in, out, 3, ncclBfloat16, fake_comm(0x12), fake_stream(0x22)), ncclSuccess);
  ASSERT_EQ(ncclAlltoAll(in, out, 2, ncclUint8, fake_comm(0x13), fake_stream(0x23)), ncclSuccess);
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].fn, "pncclAllReduce");
  EXPECT_EQ(all[0].sendbuff, in);
  EXPECT_EQ(all[0].recvbuff, out);
  EXPECT_EQ(all[0].count, 17u);
  EXPECT_EQ(all[0].datatype, int(ncclFloat16));
  EXPECT_EQ(all[0].op, int(ncclMax));
  EXPECT_EQ(all[0].comm, fake_comm(0x10));
  EXPECT_EQ(all[0].stream, fake_stream(0x20));
  EXPECT_EQ(all[1].fn, "pncclReduceScatter");
  EXPECT_EQ(all[1].count, 5u);
  EXPECT_EQ(all[1].op, int(ncclAvg));
  EXPECT_EQ(all[1].comm, fake_comm(0x11));
  EXPECT_EQ(all[2].fn, "pncclAllGather");
  EXPECT_EQ(all[2].datatype, int(ncclBfloat16));
  EXPECT_EQ(all[2].stream, fake_stream(0x22));
  EXPECT_EQ(all[3].fn, "pncclAlltoAll");
  EXPECT_EQ(all[3].count, 2u);
  EXPECT_EQ(all[3].comm, fake_comm(0x13));
}

TEST_F(Forwarding, InitRegistersAndDestroyReleases) {
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(ncclCommInitRank(&comm, 4, id, 1), ncclSuccess);
  ASSERT_NE(comm, nullptr);
  ASSERT_EQ(calls_named("pncclCommInitRank").size(), 1u);
  EXPECT_EQ(calls_named("pncclCommInitRank")[0].count, 4u);
  EXPECT_EQ(calls_named("pncclCommInitRank")[0].peer, 1);
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);  // no TOPOCOLL_TOPO_FILE in this test
  EXPECT_EQ(st->nranks, 4);
  EXPECT_EQ(st->rank, 1);
  EXPECT_EQ(served_state(comm), nullptr);
  ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
  ASSERT_EQ(calls_named("pncclCommFinalize").size(), 1u);
  ASSERT_EQ(calls_named("pncclCommDestroy").size(), 1u);
  EXPECT_EQ(calls_named("pncclCommDestroy")[0].comm, comm);
}

TEST_F(Forwarding, EveryCreationPathForwardsAndRegisters) {
  ncclUniqueId id{};
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  ncclComm_t a = nullptr, b = nullptr, c = nullptr, split = nullptr, none = nullptr, shrunk = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&a, 4, id, 1, &config), ncclSuccess);
  ASSERT_EQ(ncclCommInitRankScalable(&b, 4, 1, 1, &id, &config), ncclSuccess);
  ncclComm_t all[3] = {};
  const int devs[3] = {0, 1, 2};
  ASSERT_EQ(ncclCommInitAll(all, 3, devs), ncclSuccess);
  ASSERT_EQ(ncclCommSplit(a, 7, 3, &split, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommSplit(a, NCCL_SPLIT_NOCOLOR, 0, &none, nullptr), ncclSuccess);
  int exclude[1] = {0};
  ASSERT_EQ(ncclCommShrink(a, exclude, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess);
  c = all[0];
  for (ncclComm_t comm : {a, b, all[0], all[1], all[2], split, shrunk})
    EXPECT_NE(CommRegistry::instance().find(comm), nullptr);
  EXPECT_EQ(none, nullptr);
  const auto splits = calls_named("pncclCommSplit");
  ASSERT_EQ(splits.size(), 2u);
  EXPECT_EQ(splits[0].peer, 7);
  EXPECT_EQ(splits[0].key, 3);
  EXPECT_EQ(splits[0].comm, a);
  EXPECT_EQ(calls_named("pncclCommShrink").size(), 1u);
  EXPECT_EQ(calls_named("pncclCommInitAll").size(), 1u);
  for (ncclComm_t comm : {b, all[1], all[2], split, shrunk}) ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(a), ncclSuccess);
  ASSERT_EQ(ncclCommAbort(c), ncclSuccess);
  EXPECT_EQ(calls_named("pncclCommAbort").size(), 2u);
  EXPECT_EQ(calls_named("pncclCommDestroy").size(), 5u);
  for (ncclComm_t comm : {a, b, all[0], all[1], all[2], split, shrunk})
    EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
}

TEST_F(Forwarding, GroupsForwardWithNestingAndUnservedCallsStayInside) {
  char in[8], out[8];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 2);
  ASSERT_EQ(ncclAllReduce(in, out, 2, ncclFloat32, ncclSum, fake_comm(0x30), nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 1);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].fn, "pncclGroupStart");
  EXPECT_EQ(all[1].fn, "pncclGroupStart");
  EXPECT_EQ(all[2].fn, "pncclAllReduce");  // inside NCCL's group, as the user issued it
  EXPECT_EQ(all[3].fn, "pncclGroupEnd");
  EXPECT_EQ(all[4].fn, "pncclGroupEnd");
  // An unmatched end is NCCL's to report.
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
}

TEST_F(Forwarding, ServedCallsInsideAGroupWaitForTheOutermostEndAndDieWithTheirCommunicator) {
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(ncclCommInitRank(&comm, 8, id, 3), ncclSuccess);
  {  // Make it served, with a cached route that sends this call to a schedule.
    insert_served_state(comm);
    auto route = std::make_shared<Route>();
    route->target = RouteTarget::Schedule;
    route->algo = "hd";
    CommRegistry::instance().find(comm)->routes.insert({sched::Collective::AllReduce, int(ncclFloat32), 4}, route);
  }
  stub_nccl::reset();
  alignas(16) char in[64] = {}, out[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  // Queued: NCCL saw only the group start.
  EXPECT_EQ(stub_nccl::calls().size(), 1u);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);  // error recovery inside the group
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);       // nothing left to run
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].fn, "pncclGroupStart");
  EXPECT_EQ(all[1].fn, "pncclCommAbort");
  EXPECT_EQ(all[2].fn, "pncclGroupEnd");
  EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
}

// A communicator (rank 3 of 8) the stub made, registered with a topology-ordered one the
// stub made too; the stub's record starts after them.
void comm_with_ring(ncclComm_t* comm, ncclComm_t* ring) {
  ncclUniqueId id{};
  ASSERT_EQ(ncclCommInitRank(comm, 8, id, 3), ncclSuccess);
  ASSERT_EQ(pncclCommInitRank(ring, 8, id, 3), ncclSuccess);
  auto st = std::make_unique<CommState>();
  st->comm = *comm;
  st->nranks = 8;
  st->rank = 3;
  st->ring_comm = *ring;
  CommRegistry::instance().insert(std::move(st));
  stub_nccl::reset();
}

// A revoked topology-ordered split (the user's ncclCommShrink with NCCL_SHRINK_ABORT revokes
// it) of a communicator whose splits share its resources shares its abort flag, which the
// revoke reset: a destroy of the user's communicator, which flushes its kernels, must not
// follow an abort of the split. The split is destroyed (its revoke finalized it: NCCL's
// destroy neither flushes it nor touches the flag); reporting an error (NCCL's destroy
// would fail inside its own group) it is aborted after the user's destroy. Not sharing, it
// is aborted first as ever.
TEST_F(Forwarding, ARevokedSharingSplitIsNeverAbortedBeforeTheUsersDestroy) {
  struct Case {
    bool sharing;
    ncclResult_t ring_error;
    std::vector<std::string> order;
  };
  const std::vector<Case> cases = {
      {true, ncclSuccess, {"pncclCommDestroy ring", "pncclCommDestroy user"}},
      {true, ncclRemoteError, {"pncclCommDestroy user", "pncclCommAbort ring"}},
      {false, ncclSuccess, {"pncclCommAbort ring", "pncclCommDestroy user"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.sharing ? "splitShare=1" : "splitShare=0") + ", ring error " + std::to_string(int(c.ring_error)));
    ncclComm_t comm = nullptr, ring = nullptr;
    comm_with_ring(&comm, &ring);
    std::shared_ptr<CommState> st = CommRegistry::instance().share(comm);
    ASSERT_NE(st, nullptr);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.splitShare = c.sharing ? 1 : 0;
    st->config = CommConfigCopy(config);
    st->revoked = true;
    st->calls_stopped = true;
    st.reset();
    stub_nccl::set_async_error(ring, c.ring_error);
    ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
    std::vector<std::string> released;
    for (const auto& call : stub_nccl::calls())
      if (call.fn == "pncclCommAbort" || call.fn == "pncclCommDestroy")
        released.push_back(call.fn + (call.comm == ring ? " ring" : " user"));
    EXPECT_EQ(released, c.order);
    EXPECT_EQ(stub_nccl::group_depth(), 0);
    stub_nccl::reset();
  }
}

// A user's finalize finalizes the topology-ordered split too, unless NCCL would refuse it
// (revoked: its revoke finalized it; or reporting an error), which inside a user's group
// would fail the group: that split is left to the release.
TEST_F(Forwarding, AFinalizeLeavesARevokedOrFailedSplitToTheRelease) {
  for (const int which : {0, 1, 2}) {
    SCOPED_TRACE(which == 0 ? "healthy" : which == 1 ? "revoked" : "failed");
    ncclComm_t comm = nullptr, ring = nullptr;
    comm_with_ring(&comm, &ring);
    if (which == 1) CommRegistry::instance().share(comm)->revoked = true;
    if (which == 2) stub_nccl::set_async_error(ring, ncclRemoteError);
    ASSERT_EQ(ncclCommFinalize(comm), ncclSuccess);
    std::vector<ncclComm_t> finalized;
    for (const auto& call : stub_nccl::calls())
      if (call.fn == "pncclCommFinalize") finalized.push_back(call.comm);
    EXPECT_EQ(finalized, which == 0 ? (std::vector<ncclComm_t>{ring, comm}) : (std::vector<ncclComm_t>{comm}));
    stub_nccl::reset();
    ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
    stub_nccl::reset();
  }
}

// Abort order: the topology-ring communicator, then NCCL's abort of the user's communicator,
// and only after that topocoll's state (whose scratch free synchronises the device and would
// wait forever on kernels only the abort can end). NCCL's result reaches the caller.
TEST_F(Forwarding, AbortReachesNcclBeforeTopocollStateIsFreedAndKeepsNcclsResult) {
  ncclComm_t comm = nullptr, ring = nullptr;
  comm_with_ring(&comm, &ring);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].fn, "pncclCommAbort");
  EXPECT_EQ(all[0].comm, ring);
  EXPECT_EQ(all[1].fn, "pncclCommAbort");
  EXPECT_EQ(all[1].comm, comm);
  EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
  // A communicator topocoll never saw is NCCL's alone, result included.
  ncclComm_t other = nullptr;
  ASSERT_EQ(pncclCommInitRank(&other, 2, ncclUniqueId{}, 0), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
}

// A destroy of a communicator whose topology-ordered one failed (its own connections, an
// asynchronous error): NCCL's destroy of that failed ring would return from inside a group it
// never closes, and the user's destroy after it would be queued there and never run. The ring
// is aborted instead; the user's communicator is destroyed, and no group is left open.
TEST_F(Forwarding, ADestroyAbortsAFailedTopologyRingAndLeavesNoGroupOpen) {
  ncclComm_t comm = nullptr, ring = nullptr;
  comm_with_ring(&comm, &ring);
  stub_nccl::set_async_error(ring, ncclRemoteError);
  const long live = stub_nccl::live_comms();
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0) << "a group left open by the ring's destroy";
  std::vector<std::string> released;
  for (const auto& c : stub_nccl::calls())
    if (c.fn == "pncclCommAbort" || c.fn == "pncclCommDestroy") released.push_back(c.fn + (c.comm == ring ? " ring" : " user"));
  EXPECT_EQ(released, (std::vector<std::string>{"pncclCommAbort ring", "pncclCommDestroy user"}));
  EXPECT_EQ(stub_nccl::live_comms(), live - 2);
}

// A served communicator (state inserted by hand): calls topocoll does not take still reach
// NCCL exactly once with the user's buffers.
// What every test here assumes: the process sees no CUDA device (the stub hides any, as its
// bytes are host memory). Fails on a GPU machine if the stub stops hiding it.
TEST(StubProcess, SeesNoCudaDevice) {
  int devices = -1;
  EXPECT_NE(cudaGetDeviceCount(&devices), cudaSuccess) << devices << " device(s) visible";
}

// The vote in host memory (no device here), restored when the scope ends.
class HostMemoryVote {
 public:
  HostMemoryVote() : saved_(exchange_cuda_calls()) {
    ExchangeCudaCalls& cuda = exchange_cuda_calls();
    cuda.get_device = [](int* d) { *d = 0; return cudaSuccess; };
    cuda.malloc_async = [](void** p, std::size_t n, cudaStream_t) { *p = std::calloc(1, n); return cudaSuccess; };
    cuda.free_async = [](void* p, cudaStream_t) { std::free(p); return cudaSuccess; };
    cuda.stream_create = [](cudaStream_t*, unsigned int) { return cudaErrorNotSupported; };
    cuda.stream_destroy = [](cudaStream_t) { return cudaSuccess; };
    cuda.stream_synchronize = [](cudaStream_t) { return cudaSuccess; };
    cuda.stream_query = [](cudaStream_t) { return cudaSuccess; };
    cuda.memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind, cudaStream_t) {
      std::memcpy(d, s, n);
      return cudaSuccess;
    };
    cuda.memset_async = [](void* d, int v, std::size_t n, cudaStream_t) {
      std::memset(d, v, n);
      return cudaSuccess;
    };
  }
  ~HostMemoryVote() { exchange_cuda_calls() = saved_; }
  HostMemoryVote(const HostMemoryVote&) = delete;
  HostMemoryVote& operator=(const HostMemoryVote&) = delete;

 private:
  ExchangeCudaCalls saved_;
};

class ServedForwarding : public Forwarding {
 protected:
  void SetUp() override {
    Forwarding::SetUp();
    // A communicator's init reads the settings before any call is served (states are made
    // here without one): read now, not inside a test's allocation-failure window.
    interposer_config();
    insert_served_state(comm_);
  }
  void TearDown() override {
    // The split a test made (the stub's communicator) goes with the state, as a destroy
    // would take it.
    if (std::shared_ptr<CommState> st = CommRegistry::instance().remove(comm_))
      if (ncclComm_t ring = st->ring_comm.exchange(nullptr)) pncclCommDestroy(ring);
  }
  ncclComm_t comm_ = fake_comm(0x1000);
  // A call that failed with ncclSystemError left comm_ out of step: ncclCommGetAsyncError
  // says so and the next call (an allreduce of `count` floats) fails before it runs.
  void expect_failed_and_out_of_step(ncclResult_t r, const void* in, void* out, size_t count) {
    EXPECT_EQ(r, ncclSystemError);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSystemError);
    EXPECT_EQ(ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm_, nullptr), ncclSystemError);
    // NCCL's ncclGetLastError, which PyTorch quotes with a failed call, says why, from any
    // thread (NCCL keeps one last error for the process) ...
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("is out of step with its peers"), std::string::npos)
        << ncclGetLastError(nullptr);
    std::string elsewhere;
    std::thread([&] { elsewhere = ncclGetLastError(comm_); }).join();
    EXPECT_NE(elsewhere.find("is out of step with its peers"), std::string::npos) << elsewhere;
    // ... also after calls that did not fail, as NCCL's stays ...
    alignas(16) char small[16] = {};
    const ncclComm_t unserved = fake_comm(0x7000);
    EXPECT_EQ(ncclAllGather(small, small, 1, ncclFloat32, unserved, nullptr), ncclSuccess);
    EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("is out of step"), std::string::npos);
    // ... until NCCL logs an error of its own (a call topocoll never sees: ncclSend).
    stub_nccl::set_last_error("NCCL's newer error");
    EXPECT_STREQ(ncclGetLastError(nullptr), "NCCL's newer error");
    stub_nccl::set_last_error("the stub's last error");
  }
  // Votes (the scratch's, the topology-ordered split's) reach the stub; unless a test sets
  // the peers' votes, this rank's vote is the outcome.
  HostMemoryVote vote_;
};

// The hot-path lookup caches per thread; every insert/remove must invalidate it, also when
// NCCL hands out a freed communicator's address again.
TEST_F(ServedForwarding, LookupCacheFollowsRemoveAndReinsertOfTheSameHandle) {
  const ncclComm_t other = fake_comm(0x2000);
  CommState* first = served_state(comm_).get();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(served_state(other), nullptr);
  EXPECT_EQ(served_state(comm_).get(), first);  // cached answer
  std::shared_ptr<CommState> taken = CommRegistry::instance().remove(comm_);
  ASSERT_EQ(taken.get(), first);
  EXPECT_EQ(served_state(comm_), nullptr);
  auto unserved = std::make_unique<CommState>();
  unserved->comm = comm_;
  CommRegistry::instance().insert(std::move(unserved));
  // An unserved entry keeps no communicator served: the fast gate answers alone.
  EXPECT_EQ(served_state(comm_), nullptr);
  taken->comm = comm_;
  CommRegistry::instance().insert(std::move(taken));
  EXPECT_EQ(served_state(comm_).get(), first);
  // Another thread sees the same registry through its own cache.
  CommState* seen = nullptr;
  std::thread([&] { seen = served_state(comm_).get(); }).join();
  EXPECT_EQ(seen, first);
}

// A schedule route for an fp32 allreduce of `count` elements on the served communicator,
// with a fresh scratch, so the call's scratch grows and is voted on.
void route_allreduce_to_hd(CommState* st, int64_t count) {
  st->scratch = std::make_unique<DeviceScratch>(0);
  auto route = std::make_shared<Route>();
  route->target = RouteTarget::Schedule;
  route->algo = "hd";
  route->schedule = std::make_shared<const sched::Schedule>(
      sched::generate("hd", sched::Collective::AllReduce, st->nranks, count));
  st->routes.insert({sched::Collective::AllReduce, int(ncclFloat32), count}, route);
}

// The fixture's served state moved onto a communicator the stub made, which NCCL's
// destroy or abort (the stub's) can free.
ncclComm_t move_to_a_stub_comm(ncclComm_t fake) {
  std::shared_ptr<CommState> st = CommRegistry::instance().remove(fake);
  ncclComm_t made = nullptr;
  pncclCommInitRank(&made, st->nranks, ncclUniqueId{}, st->rank);
  st->comm = made;
  CommRegistry::instance().insert(std::move(st));
  return made;
}

// Both: the fixture's served state on a stub-made communicator, with an fp32 allreduce of
// `count` elements routed to HD and a fresh scratch.
ncclComm_t stub_comm_with_hd_allreduce(ncclComm_t fake, int64_t count) {
  const ncclComm_t comm = move_to_a_stub_comm(fake);
  route_allreduce_to_hd(CommRegistry::instance().find(comm), count);
  return comm;
}

// The fixture's served state on a stub-made communicator, with an fp32 allreduce of
// `count` elements routed to the topology-ordered split, not made yet (made by the call).
ncclComm_t stub_comm_with_topo_ring_allreduce(ncclComm_t fake, int64_t count) {
  const ncclComm_t comm = move_to_a_stub_comm(fake);
  auto route = std::make_shared<Route>();
  route->target = RouteTarget::NcclTopoRing;
  route->algo = "nccl-topo-ring";
  CommRegistry::instance().find(comm)->routes.insert({sched::Collective::AllReduce, int(ncclFloat32), count},
                                                     route);
  return comm;
}

bool forwarded_users_allreduce(const void* in, const void* out, int64_t count, ncclComm_t comm) {
  for (const Call& c : stub_nccl::calls())
    if (c.fn == "pncclAllReduce" && c.sendbuff == in && c.recvbuff == out && c.count == std::size_t(count) &&
        c.comm == comm)
      return true;
  return false;
}

// Growing the scratch is voted on by every rank of the communicator; when any rank cannot
// allocate, the call goes to NCCL unchanged on every rank (here: this rank cannot, as there
// is no device; its peers could), instead of failing the user's collective.
TEST_F(ServedForwarding, ScratchAllocationFailureSendsTheCallToNcclOnEveryRank) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  const int64_t count = 4096;
  route_allreduce_to_hd(st, count);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  {
    HostMemoryVote vote;
    stub_nccl::set_allreduce_min_peers(1);  // the peers voted "ready"
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  }
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{0})) << "this rank voted 'cannot'";
  EXPECT_TRUE(forwarded_users_allreduce(in.data(), out.data(), count, comm_))
      << "the user's allreduce did not reach NCCL";
  stub_nccl::reset();
}

// Scratch growth under memory pressure: the scratch cannot grow, and a new 4-byte
// allocation for the vote would fail too. The vote runs in the communicator's kept cell
// (VoteCell), so this rank still joins the vote its peers run, votes 0, and the call goes to
// NCCL on every rank; had it stayed out, its NCCL call would meet their vote's allreduce.
TEST_F(ServedForwarding, TheScratchVoteJoinsInTheKeptCellWhenTheDeviceHasNoMemoryLeft) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  const int64_t count = 4096;
  route_allreduce_to_hd(st, count);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  {
    HostMemoryVote vote;
    exchange_cuda_calls().stream_create = [](cudaStream_t* s, unsigned int) {
      *s = reinterpret_cast<cudaStream_t>(std::uintptr_t(0x30));
      return cudaSuccess;
    };
    st->vote_cell = VoteCell::create(0);
    exchange_cuda_calls().malloc_async = [](void**, std::size_t, cudaStream_t) { return cudaErrorMemoryAllocation; };
    stub_nccl::set_allreduce_min_peers(1);  // the peers voted "ready"
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
    st->vote_cell.reset();  // freed through the fake calls, like it was made
  }
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{0})) << "this rank joined the vote, voting 'cannot'";
  EXPECT_TRUE(forwarded_users_allreduce(in.data(), out.data(), count, comm_))
      << "the user's allreduce did not reach NCCL";
  stub_nccl::reset();
}

// The vote's stream as a peer that hung leaves it: not ready, until `until` has passed (so
// that a call the release failed to let go does not hang the test but shows in the stub's
// log after NCCL's release) or `ready_when` (when set) holds.
struct HungVote {
  static inline std::atomic<int> polls{0};
  static inline std::chrono::steady_clock::time_point until{};
  static inline std::atomic<const std::atomic<bool>*> ready_when{nullptr};
  static cudaError_t query(cudaStream_t) {
    ++polls;
    const std::atomic<bool>* flag = ready_when.load();
    if ((flag && flag->load()) || std::chrono::steady_clock::now() >= until) return cudaSuccess;
    return cudaErrorNotReady;
  }
  static void install(std::chrono::seconds hang, const std::atomic<bool>* ready = nullptr) {
    polls = 0;
    until = std::chrono::steady_clock::now() + hang;
    ready_when = ready;
    exchange_cuda_calls().stream_query = query;
  }
  static bool wait_for_polls(int n) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (polls.load() < n && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return polls.load() >= n;
  }
};

// Index of the first call named `fn` on `comm` in the stub's log, or -1.
int first_call(const std::vector<Call>& all, const char* fn, ncclComm_t comm) {
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].fn == fn && all[i].comm == comm) return int(i);
  return -1;
}

// An fp32 allreduce of kCount elements (routed to HD on `comm`), run on another thread from
// construction on, waiting on the host in the scratch vote: its stream is done once
// `peers_voted` holds (when set) or `hang` has passed. join() (or the destructor) waits for it.
class CallInTheScratchVote {
 public:
  static constexpr int64_t kCount = 4096;
  CallInTheScratchVote(ncclComm_t comm, std::chrono::seconds hang, const std::atomic<bool>* peers_voted = nullptr)
      : in(kCount, 1.0f), out(kCount, 0.0f), comm_(comm) {
    HungVote::install(hang, peers_voted);
    caller_ = std::thread([this] {
      ::testing::internal::CaptureStderr();
      result = ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comm_, nullptr);
      err = ::testing::internal::GetCapturedStderr();
    });
  }
  ~CallInTheScratchVote() { join(); }
  CallInTheScratchVote(const CallInTheScratchVote&) = delete;
  CallInTheScratchVote& operator=(const CallInTheScratchVote&) = delete;
  // Whether the call reached the vote and polls it.
  static bool waiting() { return HungVote::wait_for_polls(10); }
  void join() {
    if (caller_.joinable()) caller_.join();
  }
  // Whether the user's allreduce reached NCCL (on the user's communicator).
  bool forwarded() const { return forwarded_users_allreduce(in.data(), out.data(), kCount, comm_); }

  std::vector<float> in, out;
  ncclResult_t result = ncclInternalError;
  std::string err;  // what the call wrote to stderr

 private:
  ncclComm_t comm_;
  std::thread caller_;
};

// PyTorch's watchdog aborts a communicator from its own thread when a collective times out.
// A served call may be waiting on the host for the scratch vote just then, behind a peer
// that hung: the abort ends that wait, the call issues nothing more and fails, and NCCL's
// abort runs only after the call has left (release_fence.h).
TEST_F(ServedForwarding, AnAbortFromAnotherThreadEndsACallStuckInTheScratchVote) {
  const ncclComm_t comm = stub_comm_with_hd_allreduce(comm_, CallInTheScratchVote::kCount);
  CallInTheScratchVote call(comm, std::chrono::seconds(15));
  ASSERT_TRUE(call.waiting()) << "the call never waited for the vote";
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  call.join();
  EXPECT_EQ(call.result, ncclInvalidUsage);
  EXPECT_NE(call.err.find("aborted, revoked or released while its ready vote waited"), std::string::npos) << call.err;
  EXPECT_NE(call.err.find("the collective was not run"), std::string::npos) << call.err;
  EXPECT_FALSE(call.forwarded());
  // NCCL's abort is the last call: the served call issued nothing after it.
  const auto all = stub_nccl::calls();
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().fn, "pncclCommAbort");
  EXPECT_EQ(all.back().comm, comm);
  stub_nccl::reset();
}

// Runs `group` (one group's calls, ncclGroupStart to ncclGroupEnd, returning the end's
// result) on another thread while every vote hangs behind peers that hung, aborts
// `aborted` once the batch waits, then lets the peers vote. The abort must not have waited
// for its bound (the batch's other vote still waited). The group's result.
ncclResult_t abort_while_a_group_waits(ncclComm_t aborted, const std::function<ncclResult_t()>& group) {
  HostMemoryVote vote;
  stub_nccl::set_allreduce_min_peers(1);
  std::atomic<bool> peers_voted{false};
  HungVote::install(std::chrono::seconds(15), &peers_voted);
  ncclResult_t ended = ncclInternalError;
  std::thread caller([&] { ended = group(); });
  EXPECT_TRUE(HungVote::wait_for_polls(10)) << "the batch never waited for a vote";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclCommAbort(aborted), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("still inside after"), std::string::npos) << "the abort waited for its bound:\n" << err;
  peers_voted = true;
  caller.join();
  return ended;
}

// A group over two communicators whose votes both wait behind peers that hung: an abort
// of one lets it go while the other's vote waits (its release does not wait for that vote,
// nor for its bound), and the other's call completes.
TEST_F(ServedForwarding, ABatchOverTwoCommunicatorsLetsTheAbortedOneGoAtOnce) {
  const int64_t count = 4096;
  const ncclComm_t aborted = stub_comm_with_hd_allreduce(comm_, count);
  const ncclComm_t other_fake = fake_comm(0x3000);
  insert_served_state(other_fake);
  const ncclComm_t other = stub_comm_with_hd_allreduce(other_fake, count);
  std::vector<float> in(count, 1.0f), out(count, 0.0f), in2(count, 1.0f), out2(count, 0.0f);
  const ncclResult_t ended = abort_while_a_group_waits(aborted, [&] {
    ncclGroupStart();
    ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, aborted, nullptr);
    ncclAllReduce(in2.data(), out2.data(), count, ncclFloat32, ncclSum, other, nullptr);
    return ncclGroupEnd();
  });
  EXPECT_EQ(ended, ncclInvalidUsage);
  EXPECT_FALSE(forwarded_users_allreduce(in.data(), out.data(), count, aborted));
  // No device here, so this rank voted "cannot": the other call went to NCCL as it should.
  EXPECT_TRUE(forwarded_users_allreduce(in2.data(), out2.data(), count, other));
  EXPECT_EQ(ncclCommDestroy(other), ncclSuccess);
  stub_nccl::reset();
}

// The same with a communicator that has no vote of its own in the batch: its call went to
// the topology-ordered split in the batch's first part, and the batch then waits for the
// other communicator's vote. An abort of the first is let go while that vote waits.
TEST_F(ServedForwarding, ABatchLetsAnAbortedCommunicatorWithoutAVoteGoToo) {
  const int64_t count = 4096;
  const ncclComm_t ringed = stub_comm_with_topo_ring_allreduce(comm_, 4);
  // Its split made (and voted on) before: its call has no vote in the batch.
  create_ring_comms({CommRegistry::instance().find(ringed)}, WaitLimit{});
  ASSERT_NE(CommRegistry::instance().find(ringed)->ring_comm.load(), nullptr);
  const ncclComm_t other_fake = fake_comm(0x3000);
  insert_served_state(other_fake);
  const ncclComm_t voting = stub_comm_with_hd_allreduce(other_fake, count);
  alignas(16) static float small_in[4], small_out[4];
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  const ncclResult_t ended = abort_while_a_group_waits(ringed, [&] {
    ncclGroupStart();
    ncclAllReduce(small_in, small_out, 4, ncclFloat32, ncclSum, ringed, nullptr);
    ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, voting, nullptr);
    return ncclGroupEnd();
  });
  EXPECT_EQ(ended, ncclSuccess) << "both calls were issued before the abort";
  EXPECT_TRUE(forwarded_users_allreduce(in.data(), out.data(), count, voting));
  EXPECT_EQ(ncclCommDestroy(voting), ncclSuccess);
  stub_nccl::reset();
}

// A destroy from another thread also waits for the call inside, but lets its vote finish
// (the peers are alive): the call completes as it would have, then NCCL's destroy runs.
TEST_F(ServedForwarding, ADestroyFromAnotherThreadLetsTheScratchVoteFinish) {
  const ncclComm_t comm = stub_comm_with_hd_allreduce(comm_, CallInTheScratchVote::kCount);
  std::shared_ptr<CommState> st = served_state(comm);
  ASSERT_NE(st, nullptr);
  stub_nccl::set_allreduce_min_peers(1);
  // The peers' votes arrive while the destroy waits: well after it marked the communicator.
  std::atomic<bool> peers_voted{false};
  CallInTheScratchVote call(comm, std::chrono::seconds(15), &peers_voted);
  ASSERT_TRUE(call.waiting()) << "the call never waited for the vote";
  std::thread peers([&] {
    while (!st->releasing.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    // Ten more polls of the waiting call (at most 5 s: a call that gave up polls no more).
    const int polled = HungVote::polls.load();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (HungVote::polls.load() < polled + 10 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    peers_voted = true;
  });
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  call.join();
  peers.join();
  EXPECT_EQ(call.result, ncclSuccess);
  EXPECT_FALSE(st->aborting.load());
  // No device here, so this rank voted "cannot" and the call went to NCCL: before the destroy.
  const auto all = stub_nccl::calls();
  int forwarded = -1;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (all[i].fn == "pncclAllReduce" && all[i].sendbuff == call.in.data() && all[i].comm == comm) forwarded = int(i);
  ASSERT_GE(forwarded, 0) << "the user's allreduce did not reach NCCL";
  EXPECT_LT(forwarded, first_call(all, "pncclCommDestroy", comm));
  stub_nccl::reset();
}

// Sets `seen` once the stub's log holds a call `fn` on `comm` (or after 30 s), on its own
// thread: the end of a hung vote tied to what NCCL was asked meanwhile.
std::thread when_nccl_called(const char* fn, ncclComm_t comm, std::atomic<bool>& seen) {
  return std::thread([fn, comm, &seen] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!seen.load() && std::chrono::steady_clock::now() < deadline) {
      for (const Call& c : stub_nccl::calls())
        if (c.fn == fn && c.comm == comm) seen = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    seen = true;
  });
}

// The stub's calls on `comm` after the first `fn` on it.
std::vector<std::string> calls_after(const char* fn, ncclComm_t comm) {
  std::vector<std::string> after;
  bool past = false;
  for (const Call& c : stub_nccl::calls()) {
    if (c.comm != comm) continue;
    if (past) after.push_back(c.fn);
    if (c.fn == fn) past = true;
  }
  return after;
}

// A destroy that stops waiting at its bound (the peers never voted while it waited) stops
// the call as an abort would: the call leaves its vote rather than polling a communicator
// NCCL frees next, and issues nothing on it when the vote would have ended after the
// destroy (the peers' votes arrive only then).
TEST_F(ServedForwarding, ADestroyPastItsBoundStopsTheCallWaitingInTheScratchVote) {
  const ncclComm_t comm = stub_comm_with_hd_allreduce(comm_, CallInTheScratchVote::kCount);
  std::shared_ptr<CommState> st = served_state(comm);
  ASSERT_NE(st, nullptr);
  stub_nccl::set_allreduce_min_peers(1);
  std::atomic<bool> destroyed{false};
  CallInTheScratchVote call(comm, std::chrono::seconds(20), &destroyed);
  ASSERT_TRUE(call.waiting()) << "the call never waited for the vote";
  std::thread peers = when_nccl_called("pncclCommDestroy", comm, destroyed);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  call.join();
  peers.join();
  EXPECT_EQ(call.result, ncclInvalidUsage);
  EXPECT_NE(call.err.find("destroyed by another thread before its call of 4096 elements was issued"),
            std::string::npos)
      << call.err;
  EXPECT_FALSE(call.forwarded());
  EXPECT_EQ(calls_after("pncclCommDestroy", comm), std::vector<std::string>{})
      << "the call touched the communicator after NCCL's destroy";
  EXPECT_TRUE(st->calls_stopped.load());
  EXPECT_FALSE(st->aborting.load());
  stub_nccl::reset();
}

// A revoke NCCL refuses (after ncclCommFinalize, or a second one: init.cc ncclCommRevoke)
// stops nothing of topocoll's: NCCL's answer is passed back and the split is left alone.
TEST_F(ServedForwarding, ARevokeNcclRefusesStopsNothing) {
  std::shared_ptr<CommState> st = served_state(comm_);
  ASSERT_NE(st, nullptr);
  ASSERT_EQ(ncclCommFinalize(comm_), ncclSuccess);
  EXPECT_TRUE(st->finalize_called.load());
  stub_nccl::reset();
  stub_nccl::set_failure("pncclCommRevoke", ncclInvalidArgument);  // as NCCL answers it
  EXPECT_EQ(ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  EXPECT_FALSE(st->revoked.load());
  EXPECT_FALSE(st->calls_stopped.load()) << "a refused revoke stopped the communicator's calls";
  stub_nccl::reset();
  // Revoked once: the second revoke is NCCL's to refuse, and touches nothing else.
  const ncclComm_t other = fake_comm(0x5000);
  insert_served_state(other);
  std::shared_ptr<CommState> second = served_state(other);
  ASSERT_EQ(ncclCommRevoke(other, NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_TRUE(second->revoked.load());
  stub_nccl::reset();
  stub_nccl::set_failure("pncclCommRevoke", ncclInvalidArgument);
  EXPECT_EQ(ncclCommRevoke(other, NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  int revokes = 0;
  for (const stub_nccl::Call& c : stub_nccl::calls()) revokes += c.fn == "pncclCommRevoke";
  EXPECT_EQ(revokes, 1) << "only the user's communicator's revoke reaches NCCL";
  stub_nccl::reset();
  CommRegistry::instance().remove(other);
}

// A revoke (ncclCommRevoke, or a shrink that aborts the communicator's operations) ends the
// kernels of its collectives, the vote's allreduce among them, which then holds this
// rank's own vote: the call waiting in it must not take that for its peers' answer, even
// when the allreduce ends the instant the calls are stopped (here: the stream is done from
// then on, before the wait sees the stop). It is stopped first and issues nothing. After a
// revoke later calls on the communicator are not run either (NCCL refuses a revoked
// communicator's collectives too); after a shrink with NCCL_SHRINK_ABORT, which NCCL ends
// with the communicator usable again, they go to NCCL unchanged.
TEST_F(ServedForwarding, ARevokeEndsACallWaitingInTheScratchVoteAndRunsNoLaterCall) {
  for (const bool shrink : {false, true}) {
    SCOPED_TRACE(shrink ? "ncclCommShrink(NCCL_SHRINK_ABORT)" : "ncclCommRevoke");
    const int64_t count = CallInTheScratchVote::kCount;
    const ncclComm_t comm = stub_comm_with_hd_allreduce(comm_, count);
    std::shared_ptr<CommState> st = served_state(comm);
    ASSERT_NE(st, nullptr);
    stub_nccl::set_allreduce_min_peers(1);
    CallInTheScratchVote call(comm, std::chrono::seconds(20), &st->calls_stopped);
    ASSERT_TRUE(call.waiting()) << "the call never waited for the vote";
    ncclComm_t shrunk = nullptr;
    int excluded = 7;
    if (shrink) {
      EXPECT_EQ(ncclCommShrink(comm, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT), ncclSuccess);
    } else {
      EXPECT_EQ(ncclCommRevoke(comm, NCCL_REVOKE_DEFAULT), ncclSuccess);
    }
    call.join();
    EXPECT_EQ(call.result, ncclInvalidUsage);
    EXPECT_NE(call.err.find("revoked (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT) before its call of "
                            "4096 elements was issued"),
              std::string::npos)
        << call.err;
    EXPECT_FALSE(call.forwarded());

    ::testing::internal::CaptureStderr();
    const ncclResult_t later_result =
        ncclAllReduce(call.in.data(), call.out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    const std::string later = ::testing::internal::GetCapturedStderr();
    if (shrink) {
      EXPECT_EQ(later_result, ncclSuccess) << later;
      EXPECT_TRUE(call.forwarded()) << "the shrunk parent's call did not reach NCCL unchanged";
      EXPECT_EQ(served_state(comm), nullptr);
    } else {
      // Refused at the call, as NCCL refuses it (enqueue.cc: "communicator was revoked") ...
      EXPECT_EQ(later_result, ncclInvalidUsage);
      EXPECT_NE(later.find("allreduce: communicator " ), std::string::npos) << later;
      EXPECT_NE(later.find(" was revoked"), std::string::npos) << later;
      EXPECT_TRUE(user_allreduces().empty()) << "a call was issued on the revoked communicator";
      // ... also inside a group, which then fails whole: its other calls do not run either
      // (queued, the call would have failed only after NCCL's part ran).
      ::testing::internal::CaptureStderr();
      alignas(16) char small[16] = {};
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      EXPECT_EQ(ncclAllGather(small, small, 1, ncclFloat32, fake_comm(0x7000), nullptr), ncclSuccess);
      EXPECT_EQ(ncclAllReduce(call.in.data(), call.out.data(), count, ncclFloat32, ncclSum, comm, nullptr),
                ncclInvalidUsage);
      EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
      ::testing::internal::GetCapturedStderr();
      EXPECT_EQ(stub_nccl::group_depth(), 0);
      EXPECT_TRUE(user_allreduces().size() == 1u && !user_allreduces()[0].comm)
          << "NCCL's part of the group was not failed";
      stub_nccl::set_last_error("the stub's last error");
    }
    if (shrunk) {
      EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
    }
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
    stub_nccl::reset();
    insert_served_state(comm_);  // the next round's
  }
}

// A served call queued in another thread's open group when the communicator is aborted is
// not run at that group's end: it returns ncclInvalidUsage with a WARN, and nothing reaches
// NCCL for it.
TEST_F(ServedForwarding, ACallQueuedInAnotherThreadsGroupIsNotRunAfterTheAbort) {
  const int64_t count = 4096;
  const ncclComm_t comm = stub_comm_with_hd_allreduce(comm_, count);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;  // 1: queued in the group; 2: aborted
  ncclResult_t queued = ncclInternalError, ended = ncclInternalError;
  std::string err;
  std::thread caller([&] {
    ncclGroupStart();
    queued = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr);
    {
      std::unique_lock lock(m);
      stage = 1;
      cv.notify_all();
      cv.wait(lock, [&] { return stage == 2; });
    }
    ::testing::internal::CaptureStderr();
    ended = ncclGroupEnd();
    err = ::testing::internal::GetCapturedStderr();
  });
  {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return stage == 1; });
  }
  EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  {
    std::lock_guard lock(m);
    stage = 2;
  }
  cv.notify_all();
  caller.join();
  EXPECT_EQ(queued, ncclSuccess);
  EXPECT_EQ(ended, ncclInvalidUsage);
  EXPECT_NE(err.find("aborted by another thread before it ran; its allreduce"), std::string::npos)
      << err;
  EXPECT_FALSE(forwarded_users_allreduce(in.data(), out.data(), count, comm));
  for (const Call& c : stub_nccl::calls()) EXPECT_NE(c.fn, "pncclSend") << "a step of the schedule was issued";
  stub_nccl::reset();
}


// The communicators NCCL's abort (or destroy) was called on, in order.
std::vector<ncclComm_t> released_comms(const char* fn = "pncclCommAbort") {
  std::vector<ncclComm_t> out;
  for (const Call& c : stub_nccl::calls())
    if (c.fn == fn) out.push_back(c.comm);
  return out;
}

struct CallResult {
  ncclResult_t result = ncclInternalError;
  std::string stderr_text;
};

// An fp32 allreduce of 4 elements routed to the topology-ordered split, on another thread;
// the split (the stub's) waits until `split_may_end` holds, and this thread aborts (or
// destroys) the communicator once the split has begun.
CallResult allreduce_released_while_the_split_is_made(ncclComm_t comm, bool abort,
                                                      std::function<bool()> split_may_end) {
  std::atomic<bool> in_split{false};
  stub_nccl::set_split_hook([&] {
    in_split = true;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!split_may_end() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
  });
  alignas(16) static float in[4], out[4];
  CallResult r;
  std::thread caller([&] {
    ::testing::internal::CaptureStderr();
    r.result = ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr);
    r.stderr_text = ::testing::internal::GetCapturedStderr();
  });
  while (!in_split.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(abort ? ncclCommAbort(comm) : ncclCommDestroy(comm), ncclSuccess);
  caller.join();
  stub_nccl::set_split_hook(nullptr);  // it refers to this frame
  return r;
}

// The first call of a nccl-topo-ring route makes the split, which waits for every rank: an
// abort from another thread meanwhile waits for it, the call then issues nothing (not even
// on the new split), and the abort takes the split down with the user's communicator.
TEST_F(ServedForwarding, AnAbortWhileTheSplitIsMadeRunsNothingAndAbortsTheSplitToo) {
  const ncclComm_t comm = stub_comm_with_topo_ring_allreduce(comm_, 4);
  std::shared_ptr<CommState> st = served_state(comm);
  ASSERT_NE(st, nullptr);
  const CallResult call = allreduce_released_while_the_split_is_made(comm, true, [&] { return st->aborting.load(); });
  EXPECT_EQ(call.result, ncclInvalidUsage);
  EXPECT_NE(call.stderr_text.find("aborted by another thread while its topology-ordered communicator was "
                                  "made; its allreduce of 4 elements was not run"),
            std::string::npos)
      << call.stderr_text;
  EXPECT_TRUE(calls_named("pncclAllReduce").empty()) << "the collective was issued after the abort began";
  const std::vector<ncclComm_t> aborted = released_comms();
  ASSERT_EQ(aborted.size(), 2u) << "the split and the user's communicator, each once";
  EXPECT_NE(aborted[0], comm) << "the split first";
  EXPECT_EQ(aborted[1], comm);
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  stub_nccl::reset();
}

// A split that outlasts the release's bound (here: until NCCL's destroy of the user's
// communicator, which the release runs once it gave up waiting): the release goes on
// without it, there being none to take yet; the split, once made, is destroyed by the call
// that made it, not adopted and leaked, and the call issues nothing on the communicator
// the release went on to destroy.
TEST_F(ServedForwarding, ASplitEndingAfterTheReleaseGaveUpIsReleasedNotLeaked) {
  const ncclComm_t comm = stub_comm_with_topo_ring_allreduce(comm_, 4);
  std::shared_ptr<CommState> st = served_state(comm);
  ASSERT_NE(st, nullptr);
  const CallResult call = allreduce_released_while_the_split_is_made(
      comm, false, [] { return !released_comms("pncclCommDestroy").empty(); });
  EXPECT_EQ(call.result, ncclInvalidUsage);
  EXPECT_NE(call.stderr_text.find("was made after the release gave up waiting for the call making it; "
                                  "destroying it now"),
            std::string::npos)
      << call.stderr_text;
  EXPECT_NE(call.stderr_text.find("destroyed by another thread while its topology-ordered communicator was "
                                  "made; its allreduce of 4 elements was not run"),
            std::string::npos)
      << call.stderr_text;
  EXPECT_TRUE(calls_named("pncclAllReduce").empty());
  const std::vector<ncclComm_t> destroyed = released_comms("pncclCommDestroy");
  ASSERT_EQ(destroyed.size(), 2u) << "the user's communicator, then the split, each once";
  EXPECT_EQ(destroyed[0], comm);
  EXPECT_NE(destroyed[1], comm);
  EXPECT_TRUE(released_comms().empty());
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  stub_nccl::reset();
}

// The topology-ordered split carries the user's splitShare (NCCL shares resources by the
// parent's config, so the interposer cannot ask for sharing on the split), carries the
// buffers the user registered on the parent (before and after the split), reports its
// asynchronous errors through the parent, and is revoked with it.
TEST_F(ServedForwarding, TopologyOrderedSplitFollowsTheUsersCommunicator) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  stub_nccl::reset();
  alignas(16) static char early[256], late[256];
  void* early_handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm_, early, sizeof early, &early_handle), ncclSuccess);
  create_ring_comms({st}, WaitLimit{});
  const ncclComm_t ring = st->ring_comm.load();
  ASSERT_NE(ring, nullptr);
  void* late_handle = nullptr;
  ASSERT_EQ(ncclCommRegister(comm_, late, sizeof late, &late_handle), ncclSuccess);
  int split_share = -2, registered_on_ring = 0;
  for (const Call& c : stub_nccl::calls()) {
    if (c.fn == "pncclCommSplit" && c.comm == comm_) split_share = c.op;
    if (c.fn == "pncclCommRegister" && c.comm == ring) ++registered_on_ring;
  }
  EXPECT_EQ(split_share, NCCL_CONFIG_UNDEF_INT) << "the split carries the user's splitShare";
  EXPECT_EQ(registered_on_ring, 2) << "both buffers registered on the split";

  stub_nccl::reset();
  ASSERT_EQ(ncclCommDeregister(comm_, early_handle), ncclSuccess);
  int deregistered = 0;
  for (const Call& c : stub_nccl::calls())
    if (c.fn == "pncclCommDeregister" && (c.comm == ring || c.comm == comm_)) ++deregistered;
  EXPECT_EQ(deregistered, 2);

  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  stub_nccl::set_async_error(ring, ncclRemoteError);
  ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError) << "the split's error must reach the user";

  stub_nccl::reset();
  ASSERT_EQ(ncclCommRevoke(comm_, 0), ncclSuccess);
  int revoked = 0;
  for (const Call& c : stub_nccl::calls())
    if (c.fn == "pncclCommRevoke" && (c.comm == ring || c.comm == comm_)) ++revoked;
  EXPECT_EQ(revoked, 2);

  // Shrinking with NCCL_SHRINK_ABORT: the split is revoked first (NCCL then ends the user
  // communicator's operations and waits for its stream, where a split's hung kernel would
  // keep it waiting); a plain shrink leaves the split alone.
  for (const int flags : {NCCL_SHRINK_DEFAULT, NCCL_SHRINK_ABORT}) {
    stub_nccl::reset();
    int excluded = 7;
    ncclComm_t shrunk = nullptr;
    ASSERT_EQ(ncclCommShrink(comm_, &excluded, 1, &shrunk, nullptr, flags), ncclSuccess);
    std::vector<std::string> order;
    for (const Call& c : stub_nccl::calls())
      if ((c.fn == "pncclCommRevoke" && c.comm == ring) || (c.fn == "pncclCommShrink" && c.comm == comm_))
        order.push_back(c.fn);
    const std::vector<std::string> expected =
        flags == NCCL_SHRINK_ABORT ? std::vector<std::string>{"pncclCommRevoke", "pncclCommShrink"}
                                   : std::vector<std::string>{"pncclCommShrink"};
    EXPECT_EQ(order, expected);
    ASSERT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
  }
  stub_nccl::reset();
}

// ncclCommShrink(NCCL_SHRINK_ABORT) is how a job recovers a communicator after a peer died.
// NCCL's shrink asks ncclCommGetAsyncError whether the parent is ready (init.cc
// ncclCommEnsureReady), and under LD_PRELOAD that is the interposer's: topocoll's out-of-step
// mark, and the revoked split's errors, must be gone by then, served or not, or the shrink
// and every retry of it fail. A plain shrink of a communicator out of step fails, as NCCL's
// shrink of a failed one does.
TEST_F(ServedForwarding, AShrinkAbortRecoversACommunicatorOutOfStep) {
  struct Query {
    Query() { stub_nccl::set_readiness_query(&ncclCommGetAsyncError); }
    ~Query() { stub_nccl::set_readiness_query(nullptr); }
  } nccl_asks_the_interposer;
  std::shared_ptr<CommState> st = served_state(comm_);
  ASSERT_NE(st, nullptr);
  stub_nccl::reset();
  create_ring_comms({st.get()}, WaitLimit{});
  const ncclComm_t ring = st->ring_comm.load();
  ASSERT_NE(ring, nullptr);
  mark_out_of_step(*st, "a test's call");
  int excluded = 7;
  ncclComm_t shrunk = nullptr;
  EXPECT_EQ(ncclCommShrink(comm_, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT), ncclSystemError);
  EXPECT_EQ(shrunk, nullptr);
  stub_nccl::set_async_error(ring, ncclRemoteError);  // what the revoke does to the split's kernels
  ASSERT_EQ(ncclCommShrink(comm_, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT), ncclSuccess);
  ASSERT_NE(shrunk, nullptr);
  EXPECT_FALSE(st->served) << "its calls go to NCCL from now on";
  ncclResult_t async = ncclInternalError;
  ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(shrunk), ncclSuccess);

  // Not served (its init's exchange failed on this rank), marked all the same.
  const ncclComm_t unserved = fake_comm(0x3100);
  auto state = std::make_unique<CommState>();
  state->comm = unserved;
  state->nranks = 2;
  state->out_of_step = ncclSystemError;
  CommRegistry::instance().insert(std::move(state));
  shrunk = nullptr;
  EXPECT_EQ(ncclCommShrink(unserved, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_ABORT), ncclSuccess)
      << "the unserved communicator's mark failed NCCL's shrink";
  if (shrunk) {
    EXPECT_EQ(ncclCommDestroy(shrunk), ncclSuccess);
  }
  CommRegistry::instance().remove(unserved);
  stub_nccl::reset();
}

// This rank made its split and voted so, but could not read the vote's outcome back: its
// peers may use theirs while it cannot know, so its nccl-topo-ring calls on the user's
// communicator could meet theirs on the split. The split is released and the communicator
// marked out of step: nothing more runs on it (ACallWhoseSplitVoteIsNotReadBackRunsNowhere).
TEST_F(ServedForwarding, ASplitVoteNotReadBackMarksTheCommunicatorFailed) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  stub_nccl::reset();
  exchange_cuda_calls().memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind kind, cudaStream_t) {
    if (kind == cudaMemcpyDeviceToHost) return cudaErrorLaunchFailure;
    std::memcpy(d, s, n);
    return cudaSuccess;
  };
  ::testing::internal::CaptureStderr();
  create_ring_comms({st}, WaitLimit{});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  EXPECT_TRUE(st->ring_comm_failed);
  EXPECT_NE(err.find("cannot know whether its peers use theirs"), std::string::npos) << err;
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm_, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSystemError);
  int aborted = 0;
  for (const Call& c : stub_nccl::calls())
    if (c.fn == "pncclCommAbort" && c.comm != comm_) ++aborted;
  EXPECT_EQ(aborted, 1) << "the split made is released";
}

// The same at a call's first use of the split (TOPOCOLL_RING_COMM=lazy): the call that made
// the split runs nowhere, and every later call on the communicator returns the error too,
// issuing nothing: its peers may be on their splits.
TEST_F(ServedForwarding, ACallWhoseSplitVoteIsNotReadBackRunsNowhere) {
  const ncclComm_t comm = stub_comm_with_topo_ring_allreduce(comm_, 4);
  stub_nccl::reset();
  exchange_cuda_calls().memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind kind, cudaStream_t) {
    if (kind == cudaMemcpyDeviceToHost) return cudaErrorLaunchFailure;
    std::memcpy(d, s, n);
    return cudaSuccess;
  };
  alignas(16) static float in[4], out[4];
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSystemError);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("out of step with its peers; its allreduce of 4 elements was not run"), std::string::npos) << err;
  EXPECT_TRUE(user_allreduces().empty()) << "the user's allreduce was issued";
  stub_nccl::reset();
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSystemError);
  EXPECT_EQ(ncclAllGather(in, out, 1, ncclFloat32, comm, nullptr), ncclSystemError);
  EXPECT_TRUE(stub_nccl::calls().empty()) << "a call on the out-of-step communicator reached NCCL";
  stub_nccl::reset();
}

// A served call queued in a user group before its communicator fell out of step (another
// communicator's work on this thread, or a call of the same group, set the mark) runs
// nowhere at the group's end: no vote, no schedule.
TEST_F(ServedForwarding, ACallQueuedBeforeTheCommunicatorFellOutOfStepRunsNowhere) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  route_allreduce_to_hd(st, 64);
  alignas(16) static float in[64], out[64];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 64, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  st->out_of_step = ncclSystemError;
  stub_nccl::reset();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclGroupEnd(), ncclSystemError);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("out of step with its peers; its allreduce of 64 elements was not run"), std::string::npos) << err;
  EXPECT_EQ(calls_named("pncclAllReduce").size(), 0u) << "a vote or the call reached NCCL";
  EXPECT_EQ(calls_named("pncclSend").size() + calls_named("pncclRecv").size(), 0u);
  st->out_of_step = ncclSuccess;
}

// Lazy mode splits at the first batch with a call routed to nccl-topo-ring: a batch (a user
// group) with two such calls on one communicator makes one split and one vote, not two
// (the first would be leaked, its registrations mixed up with the second's).
TEST_F(ServedForwarding, TwoCallsOfOneCommunicatorInABatchMakeOneSplit) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  stub_nccl::reset();
  create_ring_comms({st, st}, WaitLimit{});
  int splits = 0;
  for (const Call& c : stub_nccl::calls())
    if (c.fn == "pncclCommSplit") ++splits;
  EXPECT_EQ(splits, 1);
  EXPECT_EQ(stub_nccl::allreduce_min_votes().size(), 1u);
  EXPECT_NE(st->ring_comm.load(), nullptr);
}

// Two splits of one batch with the same rank and host counts and different placements would
// look alike to NCCL's tuner on this rank (it leaves both untuned) while a rank making only
// one tunes it: the ranks of one split would pick different algorithms. Where topocoll's
// tuner looks placements up, they are made one placement at a time, in the placements' order
// (the same on every rank), each while only its own placement is registered; without the
// tuner, or without such a clash, the batch stays one group, as NCCL would make it.
TEST_F(ServedForwarding, SplitsTheTunerCannotTellApartAreMadeOneAtATime) {
  topo::BiGraphShape shape;
  shape.switches_per_group = 4;
  shape.endpoints_per_switch = 2;
  auto topology = std::make_shared<const topo::Topology>(topo::generate_bigraph(shape));
  struct Batch {
    std::vector<std::string> sequence;    // group starts and ends, splits
    std::vector<ncclComm_t> split_order;
    std::vector<SplitPlacements::Lookup> seen;  // the tuner's lookup during each split
  };
  // Three served communicators: `high` second in the batch and first in the placements'
  // order, `twin` with `low`'s placement.
  const auto make_batch = [&](uintptr_t base) {
    const ncclComm_t low = fake_comm(base + 0x100), high = fake_comm(base + 0x200), twin = fake_comm(base + 0x300);
    CommState* a = insert_served_state(high, topology, {8, 9, 10, 11, 12, 13, 14, 15});
    CommState* b = insert_served_state(low, topology, {0, 1, 2, 3, 4, 5, 6, 7});
    CommState* c = insert_served_state(twin, topology, {0, 1, 2, 3, 4, 5, 6, 7});
    Batch out;
    stub_nccl::reset();
    stub_nccl::set_split_hook([&] {
      const CommState* st = CommRegistry::instance().find(stub_nccl::calls().back().comm);
      std::set<int> hosts;
      for (int e : st->placement.endpoint_of_rank) hosts.insert(topology->endpoints()[std::size_t(e)].host_index);
      // As the tuner would look (and from now on it counts as consulted).
      out.seen.push_back(SplitPlacements::find(*topology, 8, hosts.size()));
    });
    create_ring_comms({a, b, c}, WaitLimit{});
    for (const Call& call : stub_nccl::calls()) {
      if (call.fn == "pncclGroupStart" || call.fn == "pncclGroupEnd" || call.fn == "pncclCommSplit")
        out.sequence.push_back(call.fn);
      if (call.fn == "pncclCommSplit") out.split_order.push_back(call.comm);
    }
    for (const ncclComm_t comm : {low, high, twin})
      if (std::shared_ptr<CommState> st = CommRegistry::instance().remove(comm))
        if (ncclComm_t ring = st->ring_comm.exchange(nullptr)) pncclCommDestroy(ring);
    stub_nccl::reset();
    out.sequence.resize(std::min<std::size_t>(out.sequence.size(), 7));  // the votes' group follows
    return std::make_pair(out, std::vector<ncclComm_t>{low, twin, high});
  };
  const std::vector<std::string> one_group = {"pncclGroupStart", "pncclCommSplit", "pncclCommSplit",
                                              "pncclCommSplit", "pncclGroupEnd"};
  const std::vector<std::string> two_rounds = {"pncclGroupStart", "pncclCommSplit", "pncclCommSplit", "pncclGroupEnd",
                                               "pncclGroupStart", "pncclCommSplit", "pncclGroupEnd"};
  if (!SplitPlacements::consulted()) {
    // Decided before the hook's first lookup, which then marks the tuner consulted.
    const auto [untuned, _] = make_batch(0x4000);
    EXPECT_EQ(std::vector<std::string>(untuned.sequence.begin(), untuned.sequence.begin() + 5), one_group)
        << "no tuner looks the placements up: one group, as NCCL would make it";
  }
  ASSERT_TRUE(SplitPlacements::consulted());
  const auto [tuned, placements_order] = make_batch(0x5000);
  EXPECT_EQ(tuned.sequence, two_rounds);
  EXPECT_EQ(tuned.split_order, placements_order) << "the placements' order, not the batch's";
  ASSERT_EQ(tuned.seen.size(), 3u);
  for (const SplitPlacements::Lookup& l : tuned.seen) EXPECT_FALSE(l.ambiguous) << "the tuner saw both placements at once";
}

// Sends comm's 4-float allreduce to nccl-topo-ring, which runs through the stub alone (the
// split, then NCCL's collective on it).
void route_allreduce_to_topo_ring(ncclComm_t comm) {
  auto route = std::make_shared<Route>();
  route->target = RouteTarget::NcclTopoRing;
  route->algo = "nccl-topo-ring";
  served_state(comm)->routes.insert({sched::Collective::AllReduce, int(ncclFloat32), 4}, route);
}

// Out of host memory while the topology-ordered split is made or voted on (a failed
// allocation alone, or memory exhausted from then on): once this rank joined the split,
// whatever it threw, the communicator is left decided, with its split adopted or marked
// failed (never to try again alone: its peers would not join), and no split NCCL made is
// left behind unadopted. (Before it joined, the caller marks the communicator out of step.)
TEST_F(ServedForwarding, RunningOutOfHostMemoryWhileMakingTheSplitLeavesItDecided) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  for (const bool persistent : {false, true}) {
    SCOPED_TRACE(persistent ? "every allocation from the k-th on fails" : "the k-th allocation fails");
    int threw = 0;
    for (long k = 1;; ++k) {
      SCOPED_TRACE("allocation " + std::to_string(k));
      if (ncclComm_t ring = st->ring_comm.exchange(nullptr)) pncclCommDestroy(ring);
      st->ring_comm_failed = false;
      stub_nccl::reset();
      stub_nccl::set_allreduce_min_peers(1);
      bool joined = false;
      stub_nccl::set_split_hook([&] { joined = true; });
      stub_nccl::set_recording(false);  // the stub's records allocate
      const long live_before = stub_nccl::live_comms();
      bool thrown = false;
      const auto make = [&] {
        try {
          create_ring_comms({st}, WaitLimit{});
        } catch (const std::bad_alloc&) {
          thrown = true;
        }
      };
      const bool reached = testing::with_allocation_failing(k, persistent, make);
      stub_nccl::set_recording(true);
      const bool adopted = st->ring_comm.load() != nullptr;
      if (joined) {
        EXPECT_TRUE(adopted || st->ring_comm_failed) << "undecided: a later call would split alone";
      }
      EXPECT_EQ(stub_nccl::live_comms(), live_before + (adopted ? 1 : 0)) << "a split left behind";
      if (thrown) ++threw;
      if (!reached) {
        EXPECT_TRUE(adopted) << "without a failure the split is adopted";
        break;
      }
    }
    EXPECT_GT(threw, 0);
  }
  if (ncclComm_t ring = st->ring_comm.exchange(nullptr)) pncclCommDestroy(ring);
  stub_nccl::reset();
}

// A split NCCL completes on some ranks and fails on another would leave ranks on two
// different communicators, each waiting for the other: every rank votes on its own split
// over the user's communicator and adopts it only when all made one. Here a peer could not
// (this rank's split is aborted, locally), then this rank could not (it votes 0); both
// times the route's calls run on the user's communicator.
TEST_F(ServedForwarding, TopologyOrderedSplitIsUsedOnlyWhenEveryRankMadeOne) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  stub_nccl::reset();
  stub_nccl::set_allreduce_min_peers(0);  // some peer's split failed
  ::testing::internal::CaptureStderr();
  create_ring_comms({st}, WaitLimit{});
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{1})) << "this rank made its split";
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  EXPECT_TRUE(st->ring_comm_failed);
  const std::vector<Call> splits = calls_named("pncclCommSplit");
  ASSERT_EQ(splits.size(), 1u);
  const std::vector<Call> aborts = calls_named("pncclCommAbort");
  ASSERT_EQ(aborts.size(), 1u) << "the split this rank made is released";
  EXPECT_NE(aborts[0].comm, comm_);
  EXPECT_NE(err.find("topology-ordered communicator not used (another rank could not create it)"),
            std::string::npos) << err;
  route_allreduce_to_topo_ring(comm_);
  alignas(16) float in[4] = {}, out[4] = {};
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(user_allreduces().size(), 1u);
  EXPECT_EQ(user_allreduces()[0].comm, comm_);
  EXPECT_EQ(calls_named("pncclCommSplit").size(), 1u) << "not split again";

  // This rank's split fails; its peers' succeed: it votes 0, and every rank stays off it.
  st->ring_comm_failed = false;
  stub_nccl::reset();
  stub_nccl::set_allreduce_min_peers(1);
  stub_nccl::set_failure("pncclCommSplit", ncclSystemError);
  ::testing::internal::CaptureStderr();
  create_ring_comms({st}, WaitLimit{});
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{0}));
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  EXPECT_TRUE(st->ring_comm_failed);
  EXPECT_EQ(calls_named("pncclCommAbort").size(), 1u) << "the failed split's resources";
  EXPECT_NE(err.find("(it could not be created on this rank)"), std::string::npos) << err;
  stub_nccl::reset();
}

// A user's communicator made with splitShare=1 shares its abort flag with every split of it
// (NCCL 2.28 ncclCommInitChildComm): aborting the unused topology-ordered split would abort
// the user's communicator too, and its later collectives would leave their outputs
// unwritten. Such a split is destroyed; NCCL_COMM_SPLIT_SHARE_RESOURCES=1 has the same
// effect on a communicator whose config leaves splitShare undefined.
TEST_F(ServedForwarding, AnUnusedSplitThatSharesTheUsersAbortFlagIsDestroyedNotAborted) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  const CommConfigCopy before = st->config;
  ncclConfig_t sharing = NCCL_CONFIG_INITIALIZER;
  sharing.splitShare = 1;
  st->config = CommConfigCopy(sharing);
  stub_nccl::reset();
  stub_nccl::set_allreduce_min_peers(0);  // some peer's split failed
  ::testing::internal::CaptureStderr();
  create_ring_comms({st}, WaitLimit{});
  ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(st->ring_comm_failed);
  ASSERT_EQ(calls_named("pncclCommSplit").size(), 1u);
  EXPECT_TRUE(calls_named("pncclCommAbort").empty()) << "the user's abort flag would go with it";
  const std::vector<Call> destroys = calls_named("pncclCommDestroy");
  ASSERT_EQ(destroys.size(), 1u);
  EXPECT_NE(destroys[0].comm, comm_);
  // The user's collectives still run on the user's communicator.
  route_allreduce_to_topo_ring(comm_);
  alignas(16) float in[4] = {}, out[4] = {};
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(user_allreduces().size(), 1u);
  EXPECT_EQ(user_allreduces()[0].comm, comm_);
  st->config = before;
  stub_nccl::reset();
}

// NCCL's destroy of a communicator that reports an error leaves the thread's group open and
// frees nothing: an unused split that shares the user's abort flag and reports an error is
// neither destroyed nor aborted when it is dropped, but aborted with the user's communicator.
TEST_F(ServedForwarding, AnUnusedSharingSplitThatFailedIsAbortedWithTheUsersCommunicator) {
  const ncclComm_t user = stub_comm_with_topo_ring_allreduce(comm_, 4);
  CommState* st = CommRegistry::instance().find(user);
  ASSERT_NE(st, nullptr);
  ncclConfig_t sharing = NCCL_CONFIG_INITIALIZER;
  sharing.splitShare = 1;
  st->config = CommConfigCopy(sharing);
  const long live = stub_nccl::live_comms();
  stub_nccl::reset();
  stub_nccl::set_allreduce_min_peers(0);                 // some peer's split failed
  stub_nccl::set_async_error(nullptr, ncclRemoteError);  // and this rank's reports an error
  stub_nccl::set_async_error(user, ncclSuccess);
  ::testing::internal::CaptureStderr();
  create_ring_comms({st}, WaitLimit{});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(calls_named("pncclCommDestroy").empty()) << "NCCL's destroy would leave its group open";
  EXPECT_TRUE(calls_named("pncclCommAbort").empty()) << "the user's abort flag would go with it";
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  EXPECT_NE(st->unused_split.load(), nullptr);
  EXPECT_EQ(stub_nccl::live_comms(), live + 1);
  EXPECT_NE(err.find("reports an error"), std::string::npos) << err;
  stub_nccl::set_async_error(nullptr, ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(user), ncclSuccess);
  EXPECT_EQ(calls_named("pncclCommAbort").size(), 1u) << "the split goes with the user's communicator";
  // After the user's destroy, which flushes the user's kernels an abort of the split (its
  // flag is the user's) would stop.
  std::vector<std::string> released;
  for (const auto& call : stub_nccl::calls())
    if (call.fn == "pncclCommAbort" || call.fn == "pncclCommDestroy")
      released.push_back(call.fn + (call.comm == user ? " user" : " split"));
  EXPECT_EQ(released, (std::vector<std::string>{"pncclCommDestroy user", "pncclCommAbort split"}));
  EXPECT_EQ(stub_nccl::live_comms(), live - 1);
  stub_nccl::reset();
}

// NCCL joins the streams of one communicator's calls in a group, never two communicators':
// a process driving several GPUs in one group (ncclCommInitAll, a stream per device, maybe
// each captured in a graph of its own) must not have device 0 wait for device 1.
TEST(GroupStreams, OnlyOneCommunicatorsStreamsAreJoinedTogether) {
  const ncclComm_t a = fake_comm(0xa0), b = fake_comm(0xb0);
  const cudaStream_t s1 = fake_stream(0x51), s2 = fake_stream(0x52);
  GroupStreamsSeen seen;
  note_group_call(seen, {a, s1, 0}, false);
  note_group_call(seen, {b, s2, 1}, false);
  note_group_call(seen, {a, s1, 0}, false);  // noted once
  EXPECT_EQ(seen.streams.size(), 2u);
  EXPECT_TRUE(streams_to_join(seen, {a, b}).empty()) << "one stream each: nothing to join across them";
  note_group_call(seen, {a, s2, 0}, true);
  EXPECT_EQ(seen.moved, (std::vector<ncclComm_t>{a}));
  const auto sets = streams_to_join(seen, {a, b, a});
  ASSERT_EQ(sets.size(), 1u);
  EXPECT_EQ(sets[0], (std::vector<GroupStream>{{a, s1, 0}, {a, s2, 0}}));
  EXPECT_TRUE(streams_to_join(seen, {b}).empty());
  EXPECT_TRUE(any_communicator_on_several_streams(seen));
}

// NCCL's capture rule, per communicator, each stream as the group first saw it
// (enqueue.cc ncclPlannerSetCapturingGraph).
TEST(GroupStreams, OneCommunicatorsStreamsShareOneCaptureOrNone) {
  const ncclComm_t a = fake_comm(0xa0), b = fake_comm(0xb0);
  const cudaStream_t s1 = fake_stream(0x51), s2 = fake_stream(0x52);
  const unsigned long long capture = 7, none = ~0ull;
  GroupStreamsSeen seen;
  note_group_call(seen, {a, s1, 0, capture}, false);
  EXPECT_FALSE(any_communicator_on_several_streams(seen));
  EXPECT_TRUE(captured_alike(seen, {a, s2, 0, capture}));
  EXPECT_FALSE(captured_alike(seen, {a, s2, 0, none})) << "a captured and an uncaptured stream";
  EXPECT_FALSE(captured_alike(seen, {a, s2, 0, 8})) << "two captures";
  EXPECT_TRUE(captured_alike(seen, {a, s1, 0, none})) << "a stream seen already is not looked at again";
  EXPECT_TRUE(captured_alike(seen, {b, s2, 1, none})) << "another communicator's streams are its own";
  note_group_call(seen, {a, s1, 0, none}, false);
  EXPECT_EQ(seen.streams.size(), 1u) << "one stream, noted once, with its first capture";
}

TEST(CommConfigCopy, SplitsShareResourcesAsNcclDecidesIt) {
  ncclConfig_t c = NCCL_CONFIG_INITIALIZER;
  EXPECT_FALSE(CommConfigCopy(c).splits_share_resources(""));
  EXPECT_TRUE(CommConfigCopy(c).splits_share_resources("1"));
  EXPECT_FALSE(CommConfigCopy(c).splits_share_resources("2")) << "not 0/1: NCCL takes 0";
  EXPECT_FALSE(CommConfigCopy(c).splits_share_resources("yes")) << "not a number: NCCL reads 0";
  c.splitShare = 1;
  EXPECT_TRUE(CommConfigCopy(c).splits_share_resources(""));
  EXPECT_FALSE(CommConfigCopy(c).splits_share_resources("0")) << "the environment replaces the config";
  EXPECT_FALSE(CommConfigCopy(c).splits_share_resources("yes")) << "strtoll reads 0, and NCCL takes it";
  EXPECT_TRUE(CommConfigCopy(c).splits_share_resources("99999999999999999999")) << "out of range: unset";
  c.splitShare = 0;
  EXPECT_TRUE(CommConfigCopy(c).splits_share_resources("0x1"));
}

// The split's vote waits for every rank like the scratch's: an abort from another thread
// (a watchdog, a peer that hung) ends the wait; the call issues nothing, and the split made
// goes down with the user's communicator.
TEST_F(ServedForwarding, AnAbortEndsACallWaitingInTheSplitsVote) {
  const ncclComm_t ringed = stub_comm_with_topo_ring_allreduce(comm_, 4);
  alignas(16) static float in[4], out[4];
  const ncclResult_t ended = abort_while_a_group_waits(
      ringed, [&] { return ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, ringed, nullptr); });
  EXPECT_EQ(ended, ncclInvalidUsage);
  EXPECT_TRUE(user_allreduces().empty());
  const std::vector<ncclComm_t> aborted = released_comms();
  ASSERT_EQ(aborted.size(), 2u) << "the split and the user's communicator, each once";
  EXPECT_NE(aborted[0], aborted[1]);
  stub_nccl::reset();
}

// A call holds its communicator's state by shared reference: an abort from another thread
// meanwhile (a watchdog) takes the state out of the registry, but the call's state stays
// valid until the call lets go; only then is it freed.
TEST_F(ServedForwarding, AbortFromAnotherThreadLeavesTheRunningCallsStateValid) {
  std::shared_ptr<CommState> held = served_state(comm_);  // what serve_collective holds
  ASSERT_NE(held, nullptr);
  std::weak_ptr<CommState> watch = held;
  // The interposer's abort path, with NCCL's own abort left out (the handle is a fake).
  std::thread([&] {
    EXPECT_EQ(comm_release(comm_, true, [](ncclComm_t) { return ncclSuccess; }), ncclSuccess);
  }).join();
  EXPECT_EQ(CommRegistry::instance().find(comm_), nullptr);
  EXPECT_EQ(served_state(comm_), nullptr);
  ASSERT_FALSE(watch.expired()) << "the abort freed the state of a call still running";
  EXPECT_EQ(held->comm, comm_);
  EXPECT_EQ(held->routes.find({sched::Collective::AllReduce, int(ncclFloat32), 4}), nullptr);
  held.reset();
  EXPECT_TRUE(watch.expired()) << "the state outlived its last user";
}

// ncclGroupSimulateEnd closes the group: the thread's depth follows it, the queued served
// call is dropped with the group (NCCL launches nothing), and the next call is not queued.
TEST_F(ServedForwarding, GroupSimulateEndClosesTheGroupForTopocollToo) {
  route_allreduce_to_topo_ring(comm_);
  alignas(16) char in[64] = {}, out[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  EXPECT_TRUE(user_allreduces().empty());
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(calls_named("pncclCommSplit").size(), 1u);
  const auto reduces = user_allreduces();
  ASSERT_EQ(reduces.size(), 1u);
  EXPECT_EQ(reduces[0].sendbuff, in);
  EXPECT_NE(reduces[0].comm, comm_);  // the topology-ordered split
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

// Without a ncclSimInfo_t, ncclGroupSimulateEnd launches the group as ncclGroupEnd does
// (group.cc: only a given simInfo makes it a simulation): the queued served call runs too.
// It used to be dropped while NCCL ran its own part, leaving the output unwritten.
TEST_F(ServedForwarding, GroupSimulateEndWithoutSimInfoRunsTheGroup) {
  route_allreduce_to_topo_ring(comm_);
  alignas(16) char in[64] = {}, out[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupSimulateEnd(nullptr), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  const auto reduces = user_allreduces();
  ASSERT_EQ(reduces.size(), 1u);
  EXPECT_EQ(reduces[0].sendbuff, in);
  EXPECT_NE(reduces[0].comm, comm_);  // the topology-ordered split
}

// A group NCCL fails at its end launches none of its operations: topocoll's queued call is
// dropped with them, so a caller that retries the group does not reduce twice.
TEST_F(ServedForwarding, AFailedGroupEndRunsNoneOfTheQueuedCalls) {
  route_allreduce_to_topo_ring(comm_);
  alignas(16) char in[64] = {}, out[64] = {};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  stub_nccl::set_failure("pncclGroupEnd", ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  stub_nccl::set_failure("", ncclSuccess);
  EXPECT_TRUE(user_allreduces().empty());
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  // The retry runs it once.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(user_allreduces().size(), 1u);
}

// NCCL fails a group one of whose calls failed when enqueued: its end returns the call's
// error and launches none of the group. A served call topocoll refuses itself (a
// communicator out of step) fails NCCL's part of the group the one way NCCL allows (a
// collective on a null communicator, after a WARN that says so), and topocoll's part is
// dropped; the group's end returns the refused call's error, ncclGetLastError still says
// why, and the thread's next group runs.
TEST_F(ServedForwarding, AServedCallRefusedInsideAGroupFailsTheWholeGroup) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  route_allreduce_to_topo_ring(comm_);
  const ncclComm_t unserved = fake_comm(0x7000);
  alignas(16) char in[64] = {}, out[64] = {};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllGather(in, out, 1, ncclFloat32, unserved, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);  // queued
  st->out_of_step = ncclSystemError;
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSystemError);
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSystemError);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);  // inner
  EXPECT_EQ(ncclGroupEnd(), ncclSystemError);
  const std::string err = ::testing::internal::GetCapturedStderr();
  st->out_of_step = ncclSuccess;
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  EXPECT_NE(err.find("allreduce failed inside a group: the group fails at its ncclGroupEnd"), std::string::npos)
      << err;
  // NCCL's group was failed once, with a call NCCL refuses before it touches anything.
  std::vector<Call> refused;
  for (const Call& c : calls_named("pncclAllReduce"))
    if (!c.comm) refused.push_back(c);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].count, 0u);
  EXPECT_TRUE(user_allreduces().size() == 1u && !user_allreduces()[0].comm)
      << "the queued allreduce ran after the group failed";
  EXPECT_NE(std::string(ncclGetLastError(nullptr)).find("is out of step with its peers"), std::string::npos)
      << ncclGetLastError(nullptr);
  stub_nccl::set_last_error("the stub's last error");
  // The next group starts clean.
  stub_nccl::reset();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(user_allreduces().size(), 1u);
  // A simulated group reports it as well.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  st->out_of_step = ncclSystemError;
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSystemError);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSystemError);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  // A refusal outside a group touches no group of NCCL's.
  stub_nccl::reset();
  st->out_of_step = ncclSystemError;
  EXPECT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSystemError);
  st->out_of_step = ncclSuccess;
  EXPECT_TRUE(calls_named("pncclAllReduce").empty());
}

TEST_F(ServedForwarding, UnsupportedCallsFallBackToNccl) {
  ASSERT_NE(served_state(comm_), nullptr);
  alignas(16) char buf[4096];
  const ncclRedOp_t premul = ncclRedOp_t(int(ncclNumOps) + 1);  // a dynamic (PreMulSum) op
  ASSERT_EQ(ncclAllReduce(buf, buf + 1024, 64, ncclFloat32, premul, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(ncclAllReduce(buf, buf + 1024, 0, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  // (Buffers that overlap in a way NCCL does not define are served, not forwarded: a rank
  // sees only its own pointers. gpu_check runs that case on every rank.)
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 2u);
  for (const Call& c : all) EXPECT_EQ(c.comm, comm_);
  EXPECT_EQ(all[0].op, int(premul));
  EXPECT_EQ(all[1].count, 0u);
}

// NCCL 2.28 refuses fp8 reductions on a communicator with a GPU below sm_90 (2.27 every fp8
// collective). topocoll's
// kernels could run them, but then the answer would depend on the route (an error where
// the route is NCCL's, a result where it is topocoll's): below sm_90 they go to NCCL on the
// user's communicator whatever the route, so the answer is NCCL's. fp8 data movement does
// not reduce and keeps its route.
TEST_F(ServedForwarding, Fp8ReductionsGoToNcclBelowSm90WhateverTheRoute) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  create_ring_comms({st}, WaitLimit{});
  const ncclComm_t ring = st->ring_comm.load();
  ASSERT_NE(ring, nullptr);
  st->ring_permutes = false;  // every call below goes straight to the split
  auto route = std::make_shared<Route>();
  route->target = RouteTarget::NcclTopoRing;
  route->algo = "nccl-topo-ring";
  const ncclDataType_t fp8[] = {ncclFloat8e4m3, ncclFloat8e5m2};
  for (const ncclDataType_t t : fp8)
    for (const auto c : {sched::Collective::AllReduce, sched::Collective::ReduceScatter, sched::Collective::AllGather})
      st->routes.insert({c, int(t), 64}, route);
  alignas(16) static char buf[8192];
  for (const int cc : {0, 80, 89, 90, 100}) {
    st->min_compute_capability = cc;
    for (const ncclDataType_t t : fp8) {
      stub_nccl::reset();  // NCCL 2.28: the header's version
      ASSERT_EQ(ncclAllReduce(buf, buf + 4096, 64, t, ncclSum, comm_, nullptr), ncclSuccess);
      ASSERT_EQ(ncclReduceScatter(buf, buf + 4096, 64, t, ncclMax, comm_, nullptr), ncclSuccess);
      ASSERT_EQ(ncclAllGather(buf, buf + 4096, 64, t, comm_, nullptr), ncclSuccess);
      const auto all = stub_nccl::calls();
      ASSERT_EQ(all.size(), 3u) << "cc " << cc;
      const ncclComm_t reductions_on = cc < 90 ? comm_ : ring;
      EXPECT_EQ(all[0].fn, "pncclAllReduce");
      EXPECT_EQ(all[0].comm, reductions_on) << "cc " << cc << " type " << int(t);
      EXPECT_EQ(all[1].fn, "pncclReduceScatter");
      EXPECT_EQ(all[1].comm, reductions_on) << "cc " << cc << " type " << int(t);
      EXPECT_EQ(all[2].fn, "pncclAllGather");
      EXPECT_EQ(all[2].comm, ring) << "cc " << cc << " type " << int(t);
      for (const Call& c : all) EXPECT_EQ(c.datatype, int(t));
    }
  }
  // Up to NCCL 2.27 every fp8 collective is refused below sm_90, allgather too.
  st->min_compute_capability = 80;
  stub_nccl::reset();
  stub_nccl::set_version(22707);
  ASSERT_EQ(ncclAllGather(buf, buf + 4096, 64, ncclFloat8e4m3, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(stub_nccl::calls().size(), 1u);
  EXPECT_EQ(stub_nccl::calls()[0].comm, comm_) << "NCCL 2.27's refusal, on the user's communicator";
  stub_nccl::reset();
  st->min_compute_capability = 90;
  ASSERT_EQ(ncclAllGather(buf, buf + 4096, 64, ncclFloat8e4m3, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(stub_nccl::calls()[0].comm, ring);
  stub_nccl::reset();
}

// A rank out of host memory while it plans a call cannot know the route its peers took:
// the call runs nowhere and returns ncclSystemError, the communicator reports it
// (ncclCommGetAsyncError: NCCL refuses its next operations) and nothing more is served.
// Sending it to NCCL would leave the peers serving it waiting for this rank.
TEST_F(ServedForwarding, RunningOutOfHostMemoryWhilePlanningMarksTheCommunicatorFailed) {
  alignas(16) char in[1024] = {}, out[1024] = {};
  // A first call (an all-to-all, which auto leaves to NCCL) makes what every decision shares
  // (the settings, the logs), so the failure below falls in the allreduce's own planning.
  ASSERT_EQ(ncclAlltoAll(in, out, 4, ncclFloat32, comm_, nullptr), ncclSuccess);
  ASSERT_EQ(served_state(comm_)->routes.size(), 1u);
  auto allreduces_reaching_nccl = [] {
    std::size_t n = 0;
    for (const Call& c : stub_nccl::calls()) n += c.fn == "pncclAllReduce";
    return n;
  };
  const std::size_t before = allreduces_reaching_nccl();
  ncclResult_t first = ncclSuccess;
  ASSERT_TRUE(testing::with_allocation_failing(
      1, [&] { first = ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr); }));
  expect_failed_and_out_of_step(first, in, out, 4);
  EXPECT_EQ(served_state(comm_)->routes.size(), 1u) << "no route is kept for the failed decision";
  EXPECT_EQ(allreduces_reaching_nccl(), before) << "NCCL must not get the call";
}

// A call the settings send to NCCL (here: a single-rank communicator; TOPOCOLL_ALGO=nccl and
// the size bounds take the same path, RouteDecision.WhatTheSettingsDecideAllocatesNothing)
// is neither planned nor cached on its way: out of host memory, it still reaches NCCL, as on
// every peer, and the communicator stays in step.
TEST_F(ServedForwarding, RunningOutOfHostMemoryNeverKeepsACallTheSettingsSendToNcclFromIt) {
  const ncclComm_t alone = fake_comm(0x3000);
  topo::BiGraphShape shape;
  shape.switches_per_group = 2;
  shape.endpoints_per_switch = 2;
  auto st = std::make_unique<CommState>();
  st->comm = alone;
  st->nranks = 1;
  st->rank = 0;
  st->topology = std::make_shared<const topo::Topology>(topo::generate_bigraph(shape));
  st->placement = sched::first_endpoints(*st->topology, 1);
  st->min_compute_capability = 90;
  st->served = true;
  CommRegistry::instance().insert(std::move(st));
  alignas(16) char in[64] = {}, out[64] = {};
  interposer_config();  // the settings, read once per process (at its first init)
  stub_nccl::set_recording(false);  // the stub's records allocate; counted only
  const long long before = stub_nccl::call_count();
  ncclResult_t r = ncclInternalError;
  EXPECT_FALSE(testing::with_allocation_failing(1, [&] { r = ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, alone, nullptr); }))
      << "an allocation on the way to NCCL";
  stub_nccl::set_recording(true);
  EXPECT_EQ(r, ncclSuccess);
  EXPECT_EQ(stub_nccl::call_count(), before + 1) << "NCCL got the call";
  const std::shared_ptr<CommState> state = CommRegistry::instance().remove(alone);
  ASSERT_NE(state, nullptr);
  EXPECT_EQ(state->out_of_step.load(), ncclSuccess);
  EXPECT_EQ(state->routes.size(), 0u) << "nothing cached";
}

// A served call that failed after its steps may have begun (a schedule's kernel or NCCL
// step, a block permutation; run_schedules and run_ring_calls mark it: this process has no
// device to run a schedule on): NCCL's own enqueue never leaves a call half issued, so the
// mark is what tells the user. ncclCommGetAsyncError reports it, the first mark is kept, and
// the communicator's next call runs nothing.
TEST_F(ServedForwarding, ACallThatFailedPartwayLeavesTheCommunicatorOutOfStep) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  ::testing::internal::CaptureStderr();
  mark_out_of_step(*st, "a schedule's collective");
  mark_out_of_step(*st, "permuting blocks");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("a schedule's collective failed after its steps may have begun"), std::string::npos) << err;
  EXPECT_EQ(err.find("permuting blocks"), std::string::npos) << "one WARN, for the first failure: " << err;
  alignas(16) char in[64] = {}, out[64] = {};
  stub_nccl::reset();
  expect_failed_and_out_of_step(ncclSystemError, in, out, 4);
  EXPECT_TRUE(calls_named("pncclAllReduce").empty()) << "a call ran on a communicator out of step";
  st->out_of_step = ncclSuccess;
}

// The same once the route is known (cached): out of memory while the call is queued or run
// (its vote, its batch), outside a group and at a group's end. The peers run it; this rank
// cannot know how far it got.
TEST_F(ServedForwarding, RunningOutOfHostMemoryWhileServingMarksTheCommunicatorFailed) {
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  const int64_t count = 4096;
  route_allreduce_to_hd(st, count);
  std::vector<float> in(count, 1.0f), out(count, 0.0f);
  for (const bool persistent : {false, true})
    for (const bool grouped : {false, true}) {
      SCOPED_TRACE(grouped ? "at the group's end" : "outside a group");
      SCOPED_TRACE(persistent ? "every allocation from the k-th on fails" : "the k-th allocation fails");
      int tried = 0;
      // Every allocation in turn: the call's batch, its vote, its steps.
      for (long k = 1;; ++k) {
        SCOPED_TRACE("allocation " + std::to_string(k));
        st->out_of_step = ncclSuccess;
        ncclResult_t r = ncclSuccess;
        bool reached = false;
        stub_nccl::set_recording(false);  // the stub's records allocate
        if (grouped) {
          ASSERT_EQ(ncclGroupStart(), ncclSuccess);
          ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
          reached = testing::with_allocation_failing(k, persistent, [&] { r = ncclGroupEnd(); });
        } else {
          reached = testing::with_allocation_failing(
              k, persistent, [&] { r = ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm_, nullptr); });
        }
        stub_nccl::set_recording(true);
        if (!reached) {
          EXPECT_EQ(r, ncclSuccess) << "without a failure the call runs";
          break;
        }
        ++tried;
        expect_failed_and_out_of_step(r, in.data(), out.data(), count);
        EXPECT_EQ(st->calls_inside.load(), 0) << "a release would wait for a call that left";
      }
      EXPECT_GT(tried, 2);
    }
  stub_nccl::reset();
}

TEST_F(ServedForwarding, CallsRoutedToNcclReachItThroughTheRouteCache) {
  // The decision for this key is already cached (as after a first call): NCCL.
  auto route = std::make_shared<Route>();
  route->target = RouteTarget::Nccl;
  route->algo = "nccl";
  route->reason = "test";
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  st->routes.insert({sched::Collective::AllReduce, int(ncclFloat32), 4}, route);
  alignas(16) char in[64] = {}, out[64] = {};
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(ncclAllReduce(in, out, 4, ncclFloat32, ncclSum, comm_, nullptr), ncclSuccess);
  EXPECT_EQ(st->routes.size(), 1u);
  const auto all = stub_nccl::calls();
  ASSERT_EQ(all.size(), 3u);
  for (const Call& c : all) {
    EXPECT_EQ(c.fn, "pncclAllReduce");
    EXPECT_EQ(c.sendbuff, in);
    EXPECT_EQ(c.recvbuff, out);
    EXPECT_EQ(c.count, 4u);
    EXPECT_EQ(c.comm, comm_);
  }
}

TEST_F(ServedForwarding, RouteCacheKeepsTheFirstRoutePerKey) {
  // Two threads may decide one key at once: the first stored route wins; a key that
  // differs only in datatype is a different route.
  CommState* st = served_state(comm_).get();
  ASSERT_NE(st, nullptr);
  const CallKey key{sched::Collective::AllGather, int(ncclInt8), 3};
  EXPECT_EQ(st->routes.find(key), nullptr);
  auto nccl = std::make_shared<Route>();
  nccl->target = RouteTarget::Nccl;
  st->routes.insert(key, nccl);
  st->routes.insert(key, std::make_shared<Route>());  // a second insert keeps the first
  EXPECT_EQ(st->routes.find(key), nccl);
  EXPECT_EQ(st->routes.find({sched::Collective::AllGather, int(ncclUint8), 3}), nullptr);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
