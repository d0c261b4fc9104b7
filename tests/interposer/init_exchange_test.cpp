// The init path with a topology configured, against the stub libnccl: every communicator
// creation runs the identity exchange (one ncclAllGather of 128-byte records in its own NCCL
// group), deferred to the outermost ncclGroupEnd when created inside a group. The stub
// moves no data (and CI has no GPU), so the exchange cannot agree: the communicator must
// fall back to NCCL with a WARN and keep forwarding, never hang or fail the user's call.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <fstream>
#include <string>

#include "plugin/interposer/comm_config.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/interposer.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/rank_identity.h"
#include "plugin/process_context.h"
#include "tests/common/failing_allocation.h"
#include "tests/interposer/stub_nccl.h"
#include "topo/generators.h"
#include "topo/topology_json.h"

namespace topocoll::plugin::interposer {
namespace {

// The configuration is read once per process: set it up before any test touches it.
const std::string kTopologyPath = [] {
  // One file for every process, the same bytes each time, written whole under another name
  // and renamed over it: ctest runs this binary's tests in parallel, and a reader never sees
  // it half-written. (A file per process was left behind by every death test's child.)
  const std::string path = std::string(TOPOCOLL_BINARY_DIR) + "/interposer_init_topology.json";
  const std::string written = path + "." + std::to_string(::getpid());
  topo::BiGraphShape shape;
  shape.switches_per_group = 1;
  shape.endpoints_per_switch = 2;
  shape.gpus_per_server = 1;
  std::ofstream(written) << topo::topology_to_json(topo::generate_bigraph(shape)).dump();
  std::rename(written.c_str(), path.c_str());
  setenv("TOPOCOLL_TOPO_FILE", path.c_str(), 1);
  setenv("NCCL_HOSTID", "s1", 1);
  setenv("NCCL_DEBUG", "WARN", 1);
  setenv("TOPOCOLL_INIT_TIMEOUT_S", "1", 1);  // the fake streams finish at once unless a test hangs them
  return path;
}();

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& c : stub_nccl::calls()) out.push_back(c.fn);
  return out;
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

// NCCL_COMM_BLOCKING=1 makes NCCL's communicator blocking whatever the config says (init.cc
// envConfigOverride): it is blocking to topocoll too, exchanged and served.
// The check, in a process of its own: 0 when the communicator was exchanged and is blocking.
int blocking_override_check() {
  setenv("NCCL_COMM_BLOCKING", "1", 1);  // before the process's configuration is first read
  stub_nccl::reset();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  if (ncclCommInitRankConfig(&comm, 4, id, 1, &config) != ncclSuccess) return 2;
  if (names().size() <= 1) {
    std::fprintf(stderr, "no init exchange\n");
    return 3;
  }
  const CommState* st = CommRegistry::instance().find(comm);
  if (!st || !st->blocking) {
    std::fprintf(stderr, "the communicator is not blocking to topocoll\n");
    return 4;
  }
  return ncclCommDestroy(comm) == ncclSuccess ? 0 : 5;
}

// The environment is read once per process, so this runs in a process of its own (a death
// test in the threadsafe style runs this binary again for this test alone): the order the
// binary's tests run in does not matter.
TEST(InitExchange, NcclCommBlockingOverridesTheConfigAsInNccl) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(blocking_override_check()), ::testing::ExitedWithCode(0), "");
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
  // One with a blocking config is made in NCCL's own thread all the same (a split's group
  // blocks as its parent does): no exchange, which the ranks whose split was not yet
  // written would never join.
  ncclConfig_t blocking = NCCL_CONFIG_INITIALIZER;
  blocking.blocking = 1;
  ncclComm_t blocking_child = nullptr;
  stub_nccl::reset();
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommSplit(comm, 0, 1, &blocking_child, &blocking), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(names(), std::vector<std::string>{"pncclCommSplit"});
  ASSERT_NE(CommRegistry::instance().find(blocking_child), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(blocking_child)->served);
  ASSERT_EQ(ncclCommDestroy(blocking_child), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(child), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Rank 2 of 4: a communicator made outside any group, then an open group with another init
// in it, where a test makes splits of the first. The stub's record starts at the group;
// stderr is being captured (the test ends the capture).
ncclComm_t parent_then_a_group_with_an_init(ncclComm_t* made) {
  stub_nccl::set_comm_shape(4, 2, 0);
  ncclComm_t parent = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclCommInitRank(&parent, 4, id, 2), ncclSuccess);
  stub_nccl::reset();
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(made, 4, id, 2), ncclSuccess);
  return parent;
}

size_t count_of(const std::vector<std::string>& names, const char* fn) {
  return size_t(std::count(names.begin(), names.end(), std::string(fn)));
}

// A child of a non-blocking communicator whose handle NCCL wrote only after its split
// returned is unknown to topocoll (here: a communicator made past the interposer). NCCL makes
// its own children in its own thread too: no exchange on them, and they are left to NCCL,
// inside a group (at its end) as outside one, so ranks that know the parent and ranks that do
// not treat it alike: exchanged on some, it would leave them waiting for the others until the
// init's time limit.
TEST(InitExchange, ASplitOfACommunicatorTopocollDoesNotKnowIsLeftToNccl) {
  for (const bool in_group : {false, true}) {
    SCOPED_TRACE(in_group ? "inside a group" : "outside a group");
    stub_nccl::reset();
    stub_nccl::set_comm_shape(4, 2, 0);
    ncclComm_t unknown = nullptr, child = nullptr;
    ASSERT_EQ(pncclCommInitRank(&unknown, 4, ncclUniqueId{}, 2), ncclSuccess);
    stub_nccl::reset();
    ::testing::internal::CaptureStderr();
    if (in_group) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    }
    ASSERT_EQ(ncclCommSplit(unknown, 0, 2, &child, nullptr), ncclSuccess);
    if (in_group) {
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    }
    ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(count_of(names(), "pncclAllGather"), 0u) << "exchanged where the parent is unknown";
    EXPECT_EQ(count_of(names(), "pncclCommSplit"), 1u);
    ASSERT_NE(child, nullptr);
    const CommState* st = CommRegistry::instance().find(child);
    ASSERT_NE(st, nullptr);
    EXPECT_FALSE(st->served);
    EXPECT_FALSE(st->blocking) << "its own children are left to NCCL too";
    ASSERT_EQ(ncclCommDestroy(child), ncclSuccess);
    ASSERT_EQ(pncclCommDestroy(unknown), ncclSuccess);
  }
}

// Without a topology nothing is exchanged; inside a group the communicator is registered
// without asking NCCL, which makes it only at the group's end (its size, rank and device read
// as zeros before: device 0 would be set at its release).
TEST(InitExchange, WithoutATopologyAnInitInAGroupIsNotQueriedBeforeItIsMade) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("TOPOCOLL_TOPO_FILE");
        unsetenv("TOPOCOLL_TOPOLOGY");
        stub_nccl::reset();
        stub_nccl::set_comm_shape(4, 2, 3);
        ncclComm_t comm = nullptr;
        ncclUniqueId id{};
        if (ncclGroupStart() != ncclSuccess || ncclCommInitRank(&comm, 4, id, 2) != ncclSuccess) std::_Exit(2);
        const CommState* st = CommRegistry::instance().find(comm);
        if (!st) std::_Exit(7);
        if (st->device != -1) std::_Exit(3);  // asked NCCL inside the group
        if (ncclGroupEnd() != ncclSuccess) std::_Exit(4);
        st = CommRegistry::instance().find(comm);
        if (!st || st->served || count_of(names(), "pncclAllGather") != 0) std::_Exit(5);
        std::_Exit(ncclCommDestroy(comm) == ncclSuccess ? 0 : 6);
      },
      ::testing::ExitedWithCode(0), "");
}

// NCCL's failed group end leaves a blocking init half made, with nothing in its
// ncclCommGetAsyncError to say so: topocoll runs no exchange on it.
TEST(InitExchange, AFailedGroupEndExchangesNothingOnItsInits) {
  stub_nccl::reset();
  stub_nccl::set_comm_shape(4, 2, 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&comm, 4, id, 2), ncclSuccess);
  stub_nccl::set_failure("pncclGroupEnd", ncclSystemError);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(ncclGroupEnd(), ncclSystemError);
  const std::string err = ::testing::internal::GetCapturedStderr();
  stub_nccl::set_failure("", ncclSuccess);
  EXPECT_EQ(count_of(names(), "pncclAllGather"), 0u) << err;
  const CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_EQ(st->fallback_reason, "its init's group failed");
  EXPECT_NE(err.find("ncclGroupEnd failed"), std::string::npos) << err;
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

// ncclCommInitAll inside a group: NCCL makes the communicators only at the group's end, so
// at the call they have no size, rank or device; they are left to NCCL, and nothing of
// topocoll's (a split, a vote) is issued inside the user's group.
TEST(InitExchange, InitAllInsideAGroupIsLeftToNccl) {
  stub_nccl::reset();
  stub_nccl::set_comm_shape(2, 0, 0);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(names(), (std::vector<std::string>{"pncclGroupStart", "pncclCommInitAll"}));
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (ncclComm_t c : comms) {
    const CommState* st = CommRegistry::instance().find(c);
    ASSERT_NE(st, nullptr);
    EXPECT_FALSE(st->served);
    EXPECT_EQ(st->fallback_reason, "ncclCommInitAll inside a group");
    ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
}

// NCCL makes a simulated group's communicators (only its launches are skipped): topocoll
// knows them, leaves them to NCCL, and runs no exchange in a group the user only simulated.
TEST(InitExchange, ASimulatedGroupsCommunicatorsAreKnownAndLeftToNccl) {
  stub_nccl::reset();
  ncclComm_t made = nullptr, child = nullptr;
  const ncclComm_t parent = parent_then_a_group_with_an_init(&made);
  ASSERT_EQ(ncclCommSplit(parent, 1, 0, &child, nullptr), ncclSuccess);
  ncclSimInfo_t info = NCCL_SIM_INFO_INITIALIZER;
  ASSERT_EQ(ncclGroupSimulateEnd(&info), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(count_of(names(), "pncclAllGather"), 0u);
  ASSERT_NE(child, nullptr);
  for (ncclComm_t c : {made, child}) {
    const CommState* st = CommRegistry::instance().find(c);
    ASSERT_NE(st, nullptr);
    EXPECT_EQ(st->fallback_reason, "created in a group ended by ncclGroupSimulateEnd");
    ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  ASSERT_EQ(ncclCommDestroy(parent), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

// Host memory in place of the device's, so the exchange runs without a GPU; the stream
// cannot be created, which must still let the rank join the allgather.
class InitExchangeFakeCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = exchange_cuda_calls();
    ExchangeCudaCalls& c = exchange_cuda_calls();
    c.get_device = [](int* d) { *d = 0; return cudaSuccess; };
    c.malloc_async = [](void** p, std::size_t n, cudaStream_t) {
      *p = std::calloc(1, n);
      return *p ? cudaSuccess : cudaErrorMemoryAllocation;
    };
    c.free_async = [](void* p, cudaStream_t) { std::free(p); return cudaSuccess; };
    c.stream_create = [](cudaStream_t*, unsigned int) { return cudaErrorMemoryAllocation; };
    c.stream_destroy = [](cudaStream_t) { return cudaSuccess; };
    c.stream_synchronize = [](cudaStream_t) { return cudaSuccess; };
    c.stream_query = [](cudaStream_t) { return cudaSuccess; };
    c.memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind, cudaStream_t) {
      std::memcpy(d, s, n);
      return cudaSuccess;
    };
    c.memset_async = [](void* d, int v, std::size_t n, cudaStream_t) {
      std::memset(d, v, n);
      return cudaSuccess;
    };
    stub_nccl::reset();
    stub_nccl::set_capture_payload(true);
  }
  void TearDown() override {
    exchange_cuda_calls() = saved_;
    stub_nccl::reset();
  }
  // `comm` fell back and reports ncclSystemError (topocoll left it out of step with its
  // peers, or cannot know that it did not); aborted afterwards, as the user would.
  static void expect_out_of_step_then_abort(ncclComm_t comm) {
    CommState* st = CommRegistry::instance().find(comm);
    ASSERT_NE(st, nullptr);
    EXPECT_FALSE(st->served);
    ncclResult_t async = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSystemError);
    ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
  }
  ExchangeCudaCalls saved_{};
};

// A group making an init and two splits, one of them NCCL_SPLIT_NOCOLOR on some ranks:
// exchanged in one batch at the group's end. A batch per split would differ between ranks
// ({init, c2} on one, {init, c1} then {c2} on another), and each would wait for the other.
TEST_F(InitExchangeFakeCuda, AGroupsInitsAndSplitsAreExchangedInOneBatch) {
  ncclComm_t made = nullptr, c1 = nullptr, c2 = nullptr;
  const ncclComm_t parent = parent_then_a_group_with_an_init(&made);
  ASSERT_EQ(ncclCommSplit(parent, 1, 0, &c1, nullptr), ncclSuccess);
  ASSERT_EQ(ncclCommSplit(parent, 2, 0, &c2, nullptr), ncclSuccess);
  EXPECT_EQ(c1, nullptr) << "NCCL writes a split's handle at the group's end";
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  ASSERT_NE(c1, nullptr);
  ASSERT_NE(c2, nullptr);
  const auto n = names();
  // NCCL's group end, then one exchange group: three allgathers in it.
  const auto end = std::find(n.begin(), n.end(), std::string("pncclGroupEnd"));
  ASSERT_NE(end, n.end());
  ASSERT_LT(end + 1, n.end());
  EXPECT_EQ(*(end + 1), "pncclGroupStart");
  const auto exchange_end = std::find(end + 1, n.end(), std::string("pncclGroupEnd"));
  EXPECT_EQ(std::count(end + 1, exchange_end, std::string("pncclAllGather")), 3) << ::testing::PrintToString(n);
  for (ncclComm_t c : {made, c1, c2}) {
    ASSERT_NE(CommRegistry::instance().find(c), nullptr);
    ASSERT_EQ(ncclCommDestroy(c), ncclSuccess);
  }
  ASSERT_EQ(ncclCommDestroy(parent), ncclSuccess);
  EXPECT_EQ(stub_nccl::group_depth(), 0);
}

// The exchange runs at creation, in its own group; the stub gathers no peer's record, so the
// records disagree (no peer runs topocoll, as far as they show) and every rank falls back,
// rank 0 saying why. Calls then reach NCCL unchanged.
TEST_F(InitExchangeFakeCuda, RunsAtCreationAndFallsBackWhenItCannotAgree) {
  exchange_cuda_calls().stream_create = [](cudaStream_t* s, unsigned int) {
    *s = reinterpret_cast<cudaStream_t>(std::uintptr_t(0x10));
    return cudaSuccess;
  };
  stub_nccl::set_comm_shape(4, 0, 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, 4, id, 0), ncclSuccess);
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
  EXPECT_NE(err.find("falls back to NCCL: rank 1"), std::string::npos) << err;
  EXPECT_NE(err.find("runs a different topocoll version or none"), std::string::npos) << err;
  // Calls keep reaching NCCL unchanged.
  stub_nccl::reset();
  char buf[64] = {};
  ASSERT_EQ(ncclAllReduce(buf, buf + 32, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(names(), std::vector<std::string>{"pncclAllReduce"});
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  EXPECT_EQ(CommRegistry::instance().find(comm), nullptr);
}

TEST_F(InitExchangeFakeCuda, ARankThatCannotPrepareStillJoinsWithACannotServeRecord) {
  stub_nccl::set_comm_shape(2, 0, 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto calls = stub_nccl::calls();
  const auto gather = std::find_if(calls.begin(), calls.end(),
                                   [](const stub_nccl::Call& c) { return c.fn == "pncclAllGather"; });
  ASSERT_NE(gather, calls.end()) << "the rank must join the exchange";
  EXPECT_EQ(gather->stream, cudaStreamPerThread);  // in place of the missing one
  const auto payloads = stub_nccl::allgather_payloads();
  ASSERT_EQ(payloads.size(), 1u);
  ASSERT_EQ(payloads[0].size(), sizeof(RankIdentity));
  RankIdentity sent;
  std::memcpy(&sent, payloads[0].data(), sizeof sent);
  EXPECT_EQ(sent.magic, RankIdentity::kMagic);
  EXPECT_FALSE(sent.flags & RankIdentity::kCanServe);
  EXPECT_EQ(std::string(sent.unserved_reason).rfind("cudaStreamCreate", 0), 0u) << sent.unserved_reason;
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  // Rank 0 names the rank and why (its own record: slot 0 of the gathered bytes).
  EXPECT_NE(st->fallback_reason.find("rank 0"), std::string::npos) << st->fallback_reason;
  EXPECT_NE(st->fallback_reason.find("could not prepare"), std::string::npos) << st->fallback_reason;
  EXPECT_NE(err.find("joined the init exchange as unable to serve"), std::string::npos) << err;
  EXPECT_NE(err.find("falls back to NCCL"), std::string::npos) << err;
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Without device memory for the exchange this rank cannot join it, while its peers wait
// for it there (up to their TOPOCOLL_INIT_TIMEOUT_S): its next call would meet their
// allgather in NCCL, so the communicator reports ncclSystemError and NCCL refuses its calls.
TEST_F(InitExchangeFakeCuda, WithoutDeviceMemoryTheRankCannotJoinAndTheCommunicatorFails) {
  exchange_cuda_calls().malloc_async = [](void**, std::size_t, cudaStream_t) { return cudaErrorMemoryAllocation; };
  stub_nccl::set_comm_shape(2, 1, 0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 1), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  for (const auto& c : stub_nccl::calls()) EXPECT_NE(c.fn, "pncclAllGather");
  EXPECT_NE(err.find("this rank cannot join it"), std::string::npos) << err;
  EXPECT_NE(err.find("out of step with its peers and ncclCommGetAsyncError reports ncclSystemError"), std::string::npos) << err;
  expect_out_of_step_then_abort(comm);
}

// The gathered records of a communicator whose rank r runs on endpoint r of the configured
// topology: an agreement to serve.
std::vector<unsigned char> serving_records(int n) {
  ProcessContext context = process_context();
  std::vector<unsigned char> bytes(sizeof(RankIdentity) * std::size_t(n));
  for (int r = 0; r < n; ++r) {
    const topo::Endpoint& e = context.topology->endpoints()[std::size_t(r)];
    context.host.name = e.host;
    const RankIdentity id = make_identity(e.gpu, context, true, 90, interposer_config().routing_fingerprint);
    std::memcpy(bytes.data() + sizeof id * std::size_t(r), &id, sizeof id);
  }
  return bytes;
}

// The exchange with a stream that can be created, agreeing to serve.
class InitReadyVote : public InitExchangeFakeCuda {
 protected:
  void SetUp() override {
    InitExchangeFakeCuda::SetUp();
    exchange_cuda_calls().stream_create = [](cudaStream_t* s, unsigned int) {
      *s = reinterpret_cast<cudaStream_t>(std::uintptr_t(0x10));
      return cudaSuccess;
    };
    ASSERT_NE(process_context().topology, nullptr) << process_context().topology_error;
    n_ = int(process_context().topology->endpoints().size());
    stub_nccl::set_comm_shape(n_, 0, 0);
    stub_nccl::set_allgather_result(serving_records(n_));
  }
  void TearDown() override {
    local_service_check() = nullptr;
    InitExchangeFakeCuda::TearDown();
  }
  // ncclCommInitRank as rank 0 of n_ (its result checked), what it wrote to stderr returned.
  std::string init_rank0(ncclComm_t* comm) const {
    ncclUniqueId id{};
    ::testing::internal::CaptureStderr();
    const ncclResult_t r = ncclCommInitRank(comm, n_, id, 0);
    std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(r, ncclSuccess) << err;
    return err;
  }
  // init_rank0 whose waits end at the time limit (1 s here), never hang (30 s allowed for
  // a loaded machine).
  std::string init_rank0_ending_at_the_limit(ncclComm_t* comm) const {
    const auto began = std::chrono::steady_clock::now();
    std::string err = init_rank0(comm);
    EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(30));
    return err;
  }
  // The first `n` stream queries find the collective done, every later one still running:
  // the waits after the n-th (each needs one query here) never end on their own.
  static void only_first_waits_finish(int n) {
    static std::atomic<int> queries{0}, finishing{0};
    queries = 0;
    finishing = n;
    exchange_cuda_calls().stream_query = [](cudaStream_t) {
      return queries.fetch_add(1) < finishing.load() ? cudaSuccess : cudaErrorNotReady;
    };
  }
  // The calls after the exchange's allgather.
  static std::vector<stub_nccl::Call> after_allgather() {
    const auto calls = stub_nccl::calls();
    auto it = std::find_if(calls.begin(), calls.end(),
                           [](const stub_nccl::Call& c) { return c.fn == "pncclAllGather"; });
    return it == calls.end() ? std::vector<stub_nccl::Call>{}
                             : std::vector<stub_nccl::Call>(it + 1, calls.end());
  }
  int n_ = 0;
};

TEST_F(InitReadyVote, AServedAgreementIsConfirmedByAMinVoteAndServes) {
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  const auto after = after_allgather();
  // The exchange's group end, then the vote in its own group, then (TOPOCOLL_RING_COMM=init,
  // the default) the topology-ordered split in its own group, and the vote on it.
  ASSERT_EQ(after.size(), 10u);
  EXPECT_EQ(after[0].fn, "pncclGroupEnd");
  EXPECT_EQ(after[1].fn, "pncclGroupStart");
  EXPECT_EQ(after[2].fn, "pncclAllReduce");
  EXPECT_EQ(after[2].datatype, int(ncclInt32));
  EXPECT_EQ(after[2].op, int(ncclMin));
  EXPECT_EQ(after[2].count, 1u);
  EXPECT_EQ(after[2].comm, comm);
  EXPECT_EQ(after[3].fn, "pncclGroupEnd");
  EXPECT_EQ(after[4].fn, "pncclGroupStart");
  EXPECT_EQ(after[5].fn, "pncclCommSplit");
  EXPECT_EQ(after[5].comm, comm);
  EXPECT_EQ(after[5].op, NCCL_CONFIG_UNDEF_INT) << "splitShare: the user's (undefined)";
  EXPECT_EQ(after[6].fn, "pncclGroupEnd");
  EXPECT_EQ(after[8].fn, "pncclAllReduce");
  EXPECT_EQ(after[8].comm, comm) << "the split's vote, on the user's communicator";
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{1, 1}));
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->served) << st->fallback_reason << err;
  EXPECT_NE(st->scratch, nullptr);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A peer whose NCCL init failed never joins the exchange, and nothing else would end the
// wait inside the user's init: it ends at TOPOCOLL_INIT_TIMEOUT_S (1 s here). The vote
// still goes out (with 0) after it, in step with peers that are only late; the communicator
// falls back and reports ncclSystemError, as topocoll's collectives stay enqueued on it.
TEST_F(InitReadyVote, AnExchangeWhosePeersNeverJoinEndsAtTheInitTimeout) {
  exchange_cuda_calls().stream_query = [](cudaStream_t) { return cudaErrorNotReady; };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0_ending_at_the_limit(&comm);
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(err.find("the topocoll init exchange still waited for its peers when the init's time limit passed "
                     "(TOPOCOLL_INIT_TIMEOUT_S=1)"),
            std::string::npos) << err;
  EXPECT_NE(err.find("ncclCommGetAsyncError reports ncclSystemError for it"), std::string::npos) << err;
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{0}) << "the vote goes out, as 'cannot'";
  for (const auto& c : stub_nccl::calls()) EXPECT_NE(c.fn, "pncclCommSplit");
  expect_out_of_step_then_abort(comm);
}

// NCCL's own asynchronous error on the communicator (a peer's connection closed) ends the
// wait at once, not at the time limit.
TEST_F(InitReadyVote, NcclsAsyncErrorEndsTheExchangesWait) {
  exchange_cuda_calls().stream_query = [](cudaStream_t) { return cudaErrorNotReady; };
  stub_nccl::set_async_error(nullptr, ncclRemoteError);
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0(&comm);
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(err.find("NCCL reports stub error on the communicator while the topocoll init exchange waited"),
            std::string::npos) << err;
  EXPECT_EQ(err.find("TOPOCOLL_INIT_TIMEOUT_S"), std::string::npos) << err;
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
}

// The exchange completes, the vote does not (a peer died in between): this rank voted 1
// but cannot know the outcome, so it falls back and reports the communicator failed.
TEST_F(InitReadyVote, AVoteWhosePeersNeverJoinEndsAtTheInitTimeout) {
  only_first_waits_finish(1);  // the exchange's
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0(&comm);
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(err.find("the topocoll ready vote still waited for its peers when the init's time limit"), std::string::npos) << err;
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{1});
  ASSERT_NE(CommRegistry::instance().find(comm), nullptr);
  EXPECT_EQ(CommRegistry::instance().find(comm)->scratch, nullptr) << "what the agreement prepared is freed";
  expect_out_of_step_then_abort(comm);
}

// The exchange and the ready vote complete, the vote on the topology-ordered split does not
// (a peer died making its split): inside the user's init nothing else would end that wait.
// It ends at TOPOCOLL_INIT_TIMEOUT_S; this rank cannot know whether its peers adopted their
// splits, so the communicator reports ncclSystemError.
TEST_F(InitReadyVote, TheSplitsVoteWhosePeersNeverVoteEndsAtTheTimeLimit) {
  only_first_waits_finish(2);  // the exchange's and the ready vote's
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0_ending_at_the_limit(&comm);
  ASSERT_NE(comm, nullptr);
  EXPECT_NE(err.find("the topocoll vote on the topology-ordered split still waited for its peers when "
                     "the init's time limit passed (TOPOCOLL_INIT_TIMEOUT_S=1)"),
            std::string::npos) << err;
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), (std::vector<int>{1, 1}));
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  ncclResult_t async = ncclSuccess;
  ASSERT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
  EXPECT_EQ(async, ncclSystemError);
  ASSERT_EQ(ncclCommAbort(comm), ncclSuccess);
}

// A ring order that is the rank order (always so for two ranks) needs no split: it would be
// the user's communicator again, one more NCCL init for nothing (PyTorch makes a two-rank
// communicator per pair that exchanges point to point).
TEST_F(InitReadyVote, ARankOrderRingIsNotSplit) {
  stub_nccl::set_comm_shape(2, 0, 0);
  stub_nccl::set_allgather_result(serving_records(2));
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, 2, id, 0), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  for (const auto& c : stub_nccl::calls()) EXPECT_NE(c.fn, "pncclCommSplit");
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->served) << st->fallback_reason << err;
  EXPECT_EQ(st->ring_comm.load(), nullptr);
  EXPECT_TRUE(st->ring_comm_failed) << "nccl-topo-ring runs on the user's communicator";
  EXPECT_EQ(st->ring_order, (std::vector<int>{0, 1}));
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// NCCL gives a split with a config that config, not its parent's (init.cc parseCommConfig):
// the topology-ordered split carries the user's settings, copied (the user's strings may be
// gone), and a split of the user's communicator without a config inherits them.
TEST_F(InitReadyVote, TheTopologyOrderedSplitKeepsTheUsersConfig) {
  stub_nccl::set_allreduce_min_peers(1);
  std::string net = "Socket", name = "dp-group";
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = 4;
  config.trafficClass = 7;
  config.cgaClusterSize = 2;
  config.netName = net.c_str();
  config.commName = name.c_str();
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRankConfig(&comm, n_, id, 0, &config), ncclSuccess);
  net.assign("overwritten");
  name.assign("overwritten");
  const auto split = stub_nccl::last_split_config();
  ASSERT_TRUE(split.given) << ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(split.config.maxCTAs, 4);
  EXPECT_EQ(split.config.trafficClass, 7);
  EXPECT_EQ(split.config.cgaClusterSize, 2);
  // The user's splitShare, not 1: NCCL decides sharing by the parent's config, so 1 here
  // would only make splits of the split share.
  EXPECT_EQ(split.config.splitShare, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(split.config.blocking, 1);
  EXPECT_EQ(split.net_name, "Socket");
  EXPECT_EQ(split.comm_name, "dp-group");
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_STREQ(st->config.for_split().netName, "Socket") << "the copy owns its strings";

  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(comm, 0, 0, &child, nullptr), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  ASSERT_NE(CommRegistry::instance().find(child), nullptr);
  EXPECT_EQ(CommRegistry::instance().find(child)->config.user().maxCTAs, 4);
  ASSERT_EQ(ncclCommDestroy(child), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// A caller built against an older NCCL passes a shorter config: only its `size` bytes are
// read, the rest stays undefined (NCCL's defaults).
TEST(CommConfigCopy, ReadsOnlyTheCallersSizeAndOwnsItsStrings) {
  ncclConfig_t old = NCCL_CONFIG_INITIALIZER;
  old.size = offsetof(ncclConfig_t, netName);
  old.maxCTAs = 8;
  old.trafficClass = 3;  // beyond `size`: not the caller's
  const CommConfigCopy copy(old);
  EXPECT_EQ(copy.user().maxCTAs, 8);
  EXPECT_EQ(copy.user().trafficClass, NCCL_CONFIG_UNDEF_INT);
  EXPECT_EQ(copy.user().size, sizeof(ncclConfig_t));
  EXPECT_EQ(copy.for_split().splitShare, NCCL_CONFIG_UNDEF_INT);
  ncclConfig_t sharing = NCCL_CONFIG_INITIALIZER;
  sharing.splitShare = 1;
  EXPECT_EQ(CommConfigCopy(sharing).for_split().splitShare, 1) << "the user's, kept";
  EXPECT_EQ(CommConfigCopy().for_split().maxCTAs, NCCL_CONFIG_UNDEF_INT);
  std::string name = "tp";
  ncclConfig_t named = NCCL_CONFIG_INITIALIZER;
  named.commName = name.c_str();
  CommConfigCopy a(named);
  const CommConfigCopy b = a;
  a = CommConfigCopy();
  name.assign("xx");
  EXPECT_STREQ(b.user().commName, "tp");
  EXPECT_EQ(a.user().commName, nullptr);
}

// The exchange's and the vote's device memory is allocated and freed on the stream their
// collective runs on: the free is ordered after the collective and waits for nothing else
// (cudaFree would wait for the whole device, the user's work on every stream included).
struct SlotMemoryUse {
  void* buffer;
  cudaStream_t stream;
};
std::vector<SlotMemoryUse>& slot_allocations() {
  static std::vector<SlotMemoryUse> uses;
  return uses;
}
std::vector<SlotMemoryUse>& slot_frees() {
  static std::vector<SlotMemoryUse> uses;
  return uses;
}

TEST_F(InitReadyVote, ExchangeAndVoteMemoryIsAllocatedAndFreedOnTheirCollectivesStream) {
  slot_allocations().clear();
  slot_frees().clear();
  exchange_cuda_calls().malloc_async = [](void** p, std::size_t n, cudaStream_t stream) {
    *p = std::calloc(1, n);
    slot_allocations().push_back({*p, stream});
    return cudaSuccess;
  };
  exchange_cuda_calls().free_async = [](void* p, cudaStream_t stream) {
    slot_frees().push_back({p, stream});
    std::free(p);
    return cudaSuccess;
  };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  std::vector<stub_nccl::Call> collectives;
  for (const auto& c : stub_nccl::calls())
    if (c.fn == "pncclAllGather" || c.fn == "pncclAllReduce") collectives.push_back(c);
  // The exchange, its vote, and the vote on the topology-ordered split made at init. The
  // first two allocate for themselves; the split's vote, on a served communicator, uses the
  // vote cell kept from the agreement on (allocated before the init's vote, freed with the
  // communicator).
  ASSERT_EQ(collectives.size(), 3u);
  ASSERT_EQ(slot_allocations().size(), 3u);
  const SlotMemoryUse exchange = slot_allocations()[0], cell = slot_allocations()[1], vote = slot_allocations()[2];
  const SlotMemoryUse own[] = {exchange, vote};
  ASSERT_EQ(slot_frees().size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(collectives[i].fn);
    EXPECT_EQ(own[i].stream, collectives[i].stream);
    EXPECT_EQ(collectives[i].recvbuff, own[i].buffer);
    EXPECT_EQ(slot_frees()[i].buffer, own[i].buffer);
    EXPECT_EQ(slot_frees()[i].stream, collectives[i].stream);
  }
  EXPECT_EQ(collectives[2].recvbuff, cell.buffer) << "the split's vote runs in the kept cell";
  EXPECT_EQ(collectives[2].stream, cell.stream);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
  ASSERT_EQ(slot_frees().size(), 3u);
  EXPECT_EQ(slot_frees()[2].buffer, cell.buffer) << "the cell goes with the communicator, on its stream";
  EXPECT_EQ(slot_frees()[2].stream, cell.stream);
}

// The exchange's memory came, then the device had none left: neither the vote cell of the
// agreement nor the init vote's own 4 bytes. This rank cannot join the vote its peers run:
// the communicator is out of step and reports ncclSystemError.
TEST_F(InitReadyVote, ARankThatCannotJoinTheVoteMarksTheCommunicatorFailed) {
  static std::atomic<int> allocations{0};
  allocations = 0;
  exchange_cuda_calls().malloc_async = [](void** p, std::size_t n, cudaStream_t) {
    if (allocations.fetch_add(1) > 0) return cudaErrorMemoryAllocation;
    *p = std::calloc(1, n);
    return cudaSuccess;
  };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0(&comm);
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{}) << "no vote went out";
  EXPECT_NE(err.find("cannot keep device memory and a stream for the votes"), std::string::npos) << err;
  EXPECT_NE(err.find("out of step with its peers and ncclCommGetAsyncError reports ncclSystemError"), std::string::npos) << err;
  ASSERT_NE(CommRegistry::instance().find(comm), nullptr);
  EXPECT_EQ(CommRegistry::instance().find(comm)->vote_cell, nullptr);
  expect_out_of_step_then_abort(comm);
}

// The vote's outcome cannot be read back (a CUDA error on the copy): a rank that voted 0
// still knows it (the minimum is 0 whatever its peers voted), one that voted 1 does not,
// as its peers may all have read 1 and serve.
bool fail_vote_read_back(void* d, const void* s, std::size_t n, cudaMemcpyKind kind, cudaStream_t) {
  if (kind == cudaMemcpyDeviceToHost && n == sizeof(int32_t)) return false;
  std::memcpy(d, s, n);
  return true;
}

TEST_F(InitReadyVote, AVoteNotReadBackIsKnownOnlyToARankThatVotedNo) {
  exchange_cuda_calls().memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind kind, cudaStream_t st) {
    return fail_vote_read_back(d, s, n, kind, st) ? cudaSuccess : cudaErrorLaunchFailure;
  };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(pncclCommInitRank(&comm, n_, ncclUniqueId{}, 0), ncclSuccess);  // NCCL's own: no exchange
  for (const int ready : {0, 1}) {
    ReadyVote v;
    v.comm = comm;
    v.device = 0;
    v.ready = ready;
    std::vector<ReadyVote> votes{v};
    agree_ready(votes);
    EXPECT_TRUE(votes[0].joined);
    EXPECT_FALSE(votes[0].all_ready);
    EXPECT_EQ(votes[0].known, ready == 0) << "voted " << ready;
  }
  ASSERT_EQ(pncclCommDestroy(comm), ncclSuccess);
}

// A revoke ends the communicator's kernels, the vote's allreduce among them, which then
// holds this rank's own vote; its calls are stopped just before (release_fence.h). A vote
// whose stream is done the instant that happens (before the wait can see the stop) must not
// take the buffer for its peers' answer.
std::atomic<bool> g_stopped_by_revoke{false};
TEST_F(InitReadyVote, AVoteStoppedAsItsAllreduceEndsIsNotTakenForThePeersAnswer) {
  exchange_cuda_calls().stream_query = [](cudaStream_t) {
    g_stopped_by_revoke = true;  // the revoke: the stop, then NCCL ends the kernel
    return cudaSuccess;
  };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(pncclCommInitRank(&comm, n_, ncclUniqueId{}, 0), ncclSuccess);  // NCCL's own: no exchange
  g_stopped_by_revoke = false;
  ReadyVote v;
  v.comm = comm;
  v.device = 0;
  v.ready = 1;
  v.abandon = &g_stopped_by_revoke;
  std::vector<ReadyVote> votes{v};
  agree_ready(votes);
  EXPECT_TRUE(votes[0].joined);
  EXPECT_FALSE(votes[0].all_ready) << "this rank's own vote was read back as the peers' answer";
  EXPECT_TRUE(votes[0].abandoned);
  EXPECT_FALSE(votes[0].known);
  ASSERT_EQ(pncclCommDestroy(comm), ncclSuccess);
}

// This rank voted to serve at init and could not read the outcome back: its peers may serve
// while it cannot know, so the communicator is marked out of step.
TEST_F(InitReadyVote, AnInitVoteNotReadBackMarksTheCommunicatorFailed) {
  exchange_cuda_calls().memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind kind, cudaStream_t st) {
    return fail_vote_read_back(d, s, n, kind, st) ? cudaSuccess : cudaErrorLaunchFailure;
  };
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  const std::string err = init_rank0(&comm);
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{1});
  EXPECT_NE(err.find("CUDA error in the ready vote"), std::string::npos) << err;
  EXPECT_NE(err.find("out of step with its peers and ncclCommGetAsyncError reports ncclSystemError"), std::string::npos)
      << err;
  expect_out_of_step_then_abort(comm);
}

// A served communicator's calls vote (scratch growth, the topology-ordered split) in the
// memory kept for it: when the device has no memory left, as when scratch growth fails,
// this rank still joins the vote its peers run, votes 0, and every rank sends the call to
// NCCL. Had it stayed out, its NCCL call would meet their vote's allreduce.
TEST_F(InitReadyVote, AServedCallsVoteJoinsWithoutDeviceMemory) {
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  init_rank0(&comm);
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  ASSERT_TRUE(st->served) << st->fallback_reason;
  ASSERT_NE(st->vote_cell, nullptr);
  exchange_cuda_calls().malloc_async = [](void**, std::size_t, cudaStream_t) { return cudaErrorMemoryAllocation; };
  stub_nccl::reset();
  stub_nccl::set_allreduce_min_peers(1);
  ReadyVote v;
  v.comm = comm;
  v.device = st->device;
  v.ready = 0;  // this rank's scratch could not grow
  v.cell = st->vote_cell.get();
  std::vector<ReadyVote> votes{v};
  agree_ready(votes);
  EXPECT_TRUE(votes[0].joined) << votes[0].error;
  EXPECT_FALSE(votes[0].all_ready);
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{0});
  // Without the cell the same vote stays out.
  ReadyVote alone = v;
  alone.cell = nullptr;
  std::vector<ReadyVote> again{alone};
  agree_ready(again);
  EXPECT_FALSE(again[0].joined);
  EXPECT_NE(again[0].error.find("cannot join"), std::string::npos) << again[0].error;
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(InitReadyVote, APeerThatCouldNotFinishMakesAServedRankFallBackAndFreeItsScratch) {
  stub_nccl::set_allreduce_min_peers(0);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{1});  // ready itself
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_EQ(st->scratch, nullptr);
  EXPECT_EQ(st->topology, nullptr);
  EXPECT_NE(st->fallback_reason.find("could not complete topocoll init"), std::string::npos)
      << st->fallback_reason;
  // Rank 0 says so once.
  EXPECT_NE(err.find("could not complete topocoll init"), std::string::npos) << err;
  // Calls keep reaching NCCL unchanged.
  stub_nccl::reset();
  char buf[64] = {};
  ASSERT_EQ(ncclAllReduce(buf, buf + 32, 4, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  ASSERT_EQ(names(), std::vector<std::string>{"pncclAllReduce"});
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Out of host memory at any point of a served communicator's init (every peer ready): this
// rank either serves, or told its peers it cannot (it joined the exchange and the vote, and
// its record said so or it voted 0: every rank falls back), or reports the communicator
// failed. Never unserved on its own while every peer serves (its calls would go to NCCL while
// theirs run topocoll's schedules), nor out of its peers' collectives without saying so.
// Out of host memory at each of an init's allocations in turn (`init` makes rank 0's
// communicator as a user would): this rank never leaves its peers' init collectives without
// saying so, never stays unserved alone, fails the user's init when it could not join, and
// leaves nothing NCCL made alive once the user aborts what it got.
void sweep_init_out_of_memory(int n_, const std::function<ncclResult_t(ncclComm_t*)>& init, bool persistent);
void sweep_init_out_of_memory(int n_, const std::function<ncclResult_t(ncclComm_t*)>& init) {
  for (const bool persistent : {false, true}) sweep_init_out_of_memory(n_, init, persistent);
}

// One sweep: the k-th allocation fails, for every k (a few hundred, milliseconds: a stride
// skipped the few allocations between the topology-ordered split and its vote), alone or
// with every one after it (`persistent`: memory stays exhausted).
void sweep_init_out_of_memory(int n_, const std::function<ncclResult_t(ncclComm_t*)>& init, bool persistent) {
  SCOPED_TRACE(persistent ? "every allocation from the k-th on fails" : "the k-th allocation fails");
  const std::vector<unsigned char> records = serving_records(n_);
  int tried = 0, served = 0, told = 0, init_failed = 0, failed_after = 0;
  for (long k = 1;; ++k) {
    stub_nccl::reset();
    stub_nccl::set_capture_payload(true);
    stub_nccl::set_comm_shape(n_, 0, 0);
    stub_nccl::set_allgather_result(records);
    stub_nccl::set_allreduce_min_peers(1);
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclSuccess;
    const long live_before = stub_nccl::live_comms();
    // Whatever NCCL made (the user's communicator, the topology-ordered split) is gone once
    // the user aborts what the init returned.
    const auto nothing_left_alive = [&] {
      EXPECT_EQ(stub_nccl::live_comms(), live_before) << "allocation " << k << ": a communicator NCCL made outlives the abort";
    };
    ::testing::internal::CaptureStderr();
    const bool reached = testing::with_allocation_failing(k, persistent, [&] { r = init(&comm); });
    ::testing::internal::GetCapturedStderr();
    if (r != ncclSuccess || !comm) {  // the user sees the init fail (and aborts what NCCL made)
      EXPECT_EQ(r, ncclSystemError) << "allocation " << k;
      ++init_failed;
      if (comm) ncclCommAbort(comm);
      nothing_left_alive();
      if (!reached) break;
      ++tried;
      continue;
    }
    const CommState* st = CommRegistry::instance().find(comm);
    const std::vector<int> votes = stub_nccl::allreduce_min_votes();
    const auto payloads = stub_nccl::allgather_payloads();
    const bool joined = !payloads.empty() && !votes.empty();  // the exchange and the vote
    bool record_says_cannot = false;
    if (!payloads.empty() && payloads[0].size() >= sizeof(RankIdentity)) {
      RankIdentity mine;
      std::memcpy(&mine, payloads[0].data(), sizeof mine);
      record_says_cannot = !(mine.flags & RankIdentity::kCanServe) || mine.unserved_reason[0] != '\0';
    }
    const bool voted_no = !votes.empty() && votes[0] == 0;
    ncclResult_t async = ncclSuccess;
    ncclCommGetAsyncError(comm, &async);
    const bool failed = async != ncclSuccess;
    const bool is_served = st && st->served;
    if (is_served) ++served;
    if (joined && (record_says_cannot || voted_no)) ++told;
    if (failed) ++failed_after;
    EXPECT_TRUE(is_served || (joined && (record_says_cannot || voted_no)) || failed)
        << "allocation " << k << ": unserved here while every peer serves"
        << (st ? ": " + st->fallback_reason : std::string(": not registered"));
    EXPECT_TRUE(joined || failed) << "allocation " << k << ": out of its peers' init collectives without saying so";
    ncclCommAbort(comm);
    nothing_left_alive();
    if (!reached) break;
    ++tried;
  }
  EXPECT_GT(tried, 10);
  EXPECT_GT(served, 0) << "the last run, without a failure, serves";
  if (!persistent) {
    EXPECT_GT(told, 0) << "a failure while preparing is shared through the exchange or the vote";
  }
  EXPECT_GT(init_failed, 0) << "a failure before joining fails the user's init";
}

TEST_F(InitReadyVote, RunningOutOfHostMemoryAnywhereInInitNeverLeavesThisRankAloneUnserved) {
  sweep_init_out_of_memory(n_, [&](ncclComm_t* comm) {
    ncclUniqueId id{};
    return ncclCommInitRank(comm, n_, id, 0);
  });
}

// The same for an init inside a group: topocoll's part runs at the group's end, whose result
// the user checks.
TEST_F(InitReadyVote, RunningOutOfHostMemoryAnywhereInAGroupsInitNeverLeavesThisRankAloneUnserved) {
  sweep_init_out_of_memory(n_, [&](ncclComm_t* comm) {
    ncclUniqueId id{};
    if (const ncclResult_t started = ncclGroupStart(); started != ncclSuccess) return started;
    const ncclResult_t r = ncclCommInitRank(comm, n_, id, 0);
    const ncclResult_t ended = ncclGroupEnd();  // closes the group however the init went
    return r != ncclSuccess ? r : ended;
  });
}

// The same for a split of a served communicator: the child's exchange and vote, its own
// topology-ordered split, all in the user's ncclCommSplit.
TEST_F(InitReadyVote, RunningOutOfHostMemoryAnywhereInASplitNeverLeavesThisRankAloneUnserved) {
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t parent = nullptr;
  init_rank0(&parent);
  ASSERT_TRUE(CommRegistry::instance().find(parent) && CommRegistry::instance().find(parent)->served);
  sweep_init_out_of_memory(n_, [&](ncclComm_t* comm) { return ncclCommSplit(parent, 0, 0, comm, nullptr); });
  ASSERT_EQ(ncclCommDestroy(parent), ncclSuccess);
}

// A group NCCL could not open is no group: the next init runs topocoll's part at once, as
// NCCL's own part does, instead of waiting for a group end the user will not call.
TEST_F(InitReadyVote, AGroupNcclCouldNotOpenDefersNoInit) {
  stub_nccl::set_failure("pncclGroupStart", ncclSystemError);
  ASSERT_EQ(ncclGroupStart(), ncclSystemError);
  stub_nccl::reset();
  stub_nccl::set_capture_payload(true);
  stub_nccl::set_comm_shape(n_, 0, 0);
  stub_nccl::set_allgather_result(serving_records(n_));
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t comm = nullptr;
  init_rank0(&comm);
  const CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->served) << "the exchange ran inside ncclCommInitRank: " << st->fallback_reason;
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(InitReadyVote, ARankWhoseLocalRegistrationFailsVotesZeroAndStaysUnserved) {
  stub_nccl::set_allreduce_min_peers(1);  // its peers were ready
  local_service_check() = [](const CommState&) { throw std::runtime_error("no memory for the plan"); };
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{0});
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_EQ(st->scratch, nullptr);
  EXPECT_NE(err.find("no memory for the plan"), std::string::npos) << err;  // its own reason
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(InitReadyVote, ARankThatCannotReadTheRecordsBackStillVotesZero) {
  // It cannot know whether its peers agreed to serve, so it joins the vote with 0.
  stub_nccl::set_allreduce_min_peers(1);
  exchange_cuda_calls().memcpy_async = [](void* d, const void* s, std::size_t n, cudaMemcpyKind k,
                                          cudaStream_t) {
    if (k == cudaMemcpyDeviceToHost && n > sizeof(int32_t)) return cudaErrorLaunchFailure;
    std::memcpy(d, s, n);
    return cudaSuccess;
  };
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{0});
  ASSERT_NE(CommRegistry::instance().find(comm), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(comm)->served);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(InitReadyVote, AFallbackAgreementVotesZeroAndNeverServes) {
  // Peers that would vote 1 cannot make it serve: the records already said fall back.
  stub_nccl::set_allreduce_min_peers(1);
  std::vector<unsigned char> records = serving_records(n_);
  RankIdentity last;
  std::memcpy(&last, records.data() + sizeof last * std::size_t(n_ - 1), sizeof last);
  mark_unserved(last, "test");
  std::memcpy(records.data() + sizeof last * std::size_t(n_ - 1), &last, sizeof last);
  stub_nccl::set_allgather_result(records);
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRank(&comm, n_, id, 0), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stub_nccl::allreduce_min_votes(), std::vector<int>{0});
  ASSERT_NE(CommRegistry::instance().find(comm), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(comm)->served);
  EXPECT_EQ(CommRegistry::instance().find(comm)->scratch, nullptr);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST_F(InitReadyVote, CreationInsideAGroupVotesAfterTheExchangeAtTheOutermostEnd) {
  stub_nccl::set_allreduce_min_peers(1);
  ncclComm_t a = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclCommInitRank(&a, n_, id, 0), ncclSuccess);
  EXPECT_TRUE(stub_nccl::allreduce_min_votes().empty());
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  const auto after = after_allgather();
  ASSERT_EQ(after.size(), 10u);  // group end, the vote, the split at init and its vote
  EXPECT_EQ(after[2].fn, "pncclAllReduce");
  EXPECT_EQ(after[5].fn, "pncclCommSplit");
  EXPECT_EQ(stub_nccl::group_depth(), 0);
  ASSERT_NE(CommRegistry::instance().find(a), nullptr);
  EXPECT_TRUE(CommRegistry::instance().find(a)->served);
  ASSERT_EQ(ncclCommDestroy(a), ncclSuccess);
}

TEST(InitExchange, AnInitStillInProgressIsNonBlockingForItsChildren) {
  unsetenv("NCCL_COMM_BLOCKING");  // a child judged by NCCL's default would be blocking
  stub_nccl::reset();
  stub_nccl::set_failure("pncclCommInitRankConfig", ncclInProgress);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclUniqueId id{};
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 4, id, 1, &config), ncclInProgress);
  CommState* st = CommRegistry::instance().find(comm);
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->served);
  EXPECT_FALSE(st->blocking);
  stub_nccl::reset();
  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(comm, 0, 1, &child, nullptr), ncclSuccess);
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(names(), std::vector<std::string>{"pncclCommSplit"});  // no exchange
  ASSERT_NE(CommRegistry::instance().find(child), nullptr);
  EXPECT_FALSE(CommRegistry::instance().find(child)->blocking);
  ASSERT_EQ(ncclCommDestroy(child), ncclSuccess);
  ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
