// libnccl_emu.so: NCCL's semantics between forked processes (2, 3 and 4 ranks), between
// ranks of one process (ncclCommInitAll), and under CUDA graph capture (cudart_emu).
// Every child process checks its own results against a reference and exits 0 only if all
// match; the parent asserts that every child did.
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "kernels/reduce_cpu.h"
#include "tests/emu/forked_ranks.h"

namespace {

using topocoll::emu::testing::run_ranks;

#define EXPECT_NCCL_OK(call)                                                          \
  do {                                                                                \
    const ncclResult_t r_ = (call);                                                   \
    if (r_ != ncclSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d: %s -> %s\n", __FILE__, __LINE__, #call,            \
                   ncclGetErrorString(r_));                                           \
      return false;                                                                   \
    }                                                                                 \
  } while (0)

#define EXPECT_TRUE_OR_FAIL(cond)                                                     \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
      return false;                                                                   \
    }                                                                                 \
  } while (0)

// The value rank `rank` contributes at element i: small integers, exact in float.
float input_f32(int rank, std::size_t i) { return float(rank * 3 + int(i % 11)) - 4.0f; }

class NcclEmuRanks : public ::testing::TestWithParam<int> {};

TEST_P(NcclEmuRanks, AllReduceSumMaxAvg) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    const std::size_t count = 1001;  // not a multiple of anything
    std::vector<float> in(count), out(count, -1.0f);
    for (std::size_t i = 0; i < count; ++i) in[i] = input_f32(rank, i);
    EXPECT_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, 0));
    for (std::size_t i = 0; i < count; ++i) {
      float want = 0;
      for (int p = 0; p < n; ++p) want += input_f32(p, i);
      EXPECT_TRUE_OR_FAIL(out[i] == want);
    }
    // Max, in place.
    std::vector<std::int32_t> values(count);
    for (std::size_t i = 0; i < count; ++i) values[i] = std::int32_t((rank * 7919 + i * 31) % 1000) - 500;
    EXPECT_NCCL_OK(ncclAllReduce(values.data(), values.data(), count, ncclInt32, ncclMax, comm, 0));
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t want = INT32_MIN;
      for (int p = 0; p < n; ++p) want = std::max(want, std::int32_t((p * 7919 + i * 31) % 1000) - 500);
      EXPECT_TRUE_OR_FAIL(values[i] == want);
    }
    // Avg: exact when dividing by a power of two.
    if ((n & (n - 1)) == 0) {
      EXPECT_NCCL_OK(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclAvg, comm, 0));
      for (std::size_t i = 0; i < count; ++i) {
        float sum = 0;
        for (int p = 0; p < n; ++p) sum += input_f32(p, i);
        EXPECT_TRUE_OR_FAIL(out[i] == sum / float(n));
      }
    }
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, ReduceScatterOutOfPlaceAndInPlace) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    const std::size_t count = 37;
    const auto value = [](int p, std::size_t i) { return std::int64_t(p) * 1000003 + std::int64_t(i); };
    std::vector<std::int64_t> in(count * std::size_t(n)), out(count);
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = value(rank, i);
    EXPECT_NCCL_OK(ncclReduceScatter(in.data(), out.data(), count, ncclInt64, ncclSum, comm, 0));
    // In place: the output is this rank's block of the input.
    std::vector<std::int64_t> inplace = in;
    std::int64_t* own_block = inplace.data() + std::size_t(rank) * count;
    EXPECT_NCCL_OK(ncclReduceScatter(inplace.data(), own_block, count, ncclInt64, ncclSum, comm, 0));
    for (std::size_t i = 0; i < count; ++i) {
      std::int64_t want = 0;
      for (int p = 0; p < n; ++p) want += value(p, std::size_t(rank) * count + i);
      EXPECT_TRUE_OR_FAIL(out[i] == want);
      EXPECT_TRUE_OR_FAIL(own_block[i] == want);
    }
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, AllGatherOutOfPlaceAndInPlace) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    const std::size_t count = 13;
    std::vector<std::uint16_t> in(count), out(count * std::size_t(n)), inplace(count * std::size_t(n));
    for (std::size_t i = 0; i < count; ++i) in[i] = std::uint16_t(rank * 100 + int(i));
    EXPECT_NCCL_OK(ncclAllGather(in.data(), out.data(), count, ncclFloat16, comm, 0));
    std::copy(in.begin(), in.end(), inplace.begin() + std::ptrdiff_t(rank * count));
    EXPECT_NCCL_OK(ncclAllGather(inplace.data() + rank * count, inplace.data(), count, ncclFloat16,
                                 comm, 0));
    for (int p = 0; p < n; ++p)
      for (std::size_t i = 0; i < count; ++i) {
        EXPECT_TRUE_OR_FAIL(out[std::size_t(p) * count + i] == std::uint16_t(p * 100 + int(i)));
        EXPECT_TRUE_OR_FAIL(inplace[std::size_t(p) * count + i] == std::uint16_t(p * 100 + int(i)));
      }
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, AlltoAllBroadcastReduce) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    const std::size_t count = 5;
    // Block p of rank r's input carries (r, p); rank r's output block p must carry (p, r).
    std::vector<std::int32_t> in(count * std::size_t(n)), out(in.size());
    for (int p = 0; p < n; ++p)
      for (std::size_t i = 0; i < count; ++i) in[std::size_t(p) * count + i] = rank * 10000 + p * 100 + int(i);
    EXPECT_NCCL_OK(ncclAlltoAll(in.data(), out.data(), count, ncclInt32, comm, 0));
    for (int p = 0; p < n; ++p)
      for (std::size_t i = 0; i < count; ++i)
        EXPECT_TRUE_OR_FAIL(out[std::size_t(p) * count + i] == p * 10000 + rank * 100 + int(i));

    const int root = 1 % n;
    std::vector<double> buffer(count, rank == root ? 2.5 : 0.0);
    EXPECT_NCCL_OK(ncclBroadcast(buffer.data(), buffer.data(), count, ncclFloat64, root, comm, 0));
    for (double v : buffer) EXPECT_TRUE_OR_FAIL(v == 2.5);

    std::vector<std::uint8_t> mine(count, std::uint8_t(rank + 2)), product(count, 0);
    EXPECT_NCCL_OK(ncclReduce(mine.data(), product.data(), count, ncclUint8, ncclProd, root, comm, 0));
    std::uint8_t want = 1;
    for (int p = 0; p < n; ++p) want = std::uint8_t(want * (p + 2));
    for (std::uint8_t v : product) EXPECT_TRUE_OR_FAIL(v == (rank == root ? want : 0));
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, SendRecvRingInsideGroup) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
    std::vector<std::uint8_t> out(64, std::uint8_t(rank)), in(64, 0xff);
    // Receive posted before send: only a group makes this order legal.
    EXPECT_NCCL_OK(ncclGroupStart());
    EXPECT_NCCL_OK(ncclRecv(in.data(), in.size(), ncclUint8, prev, comm, 0));
    EXPECT_NCCL_OK(ncclSend(out.data(), out.size(), ncclUint8, next, comm, 0));
    EXPECT_NCCL_OK(ncclGroupEnd());
    for (std::uint8_t v : in) EXPECT_TRUE_OR_FAIL(v == std::uint8_t(prev));
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, TwoCollectivesInOneNestedGroup) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    std::uint32_t mine = std::uint32_t(rank + 1), sum = 0;
    std::vector<std::uint32_t> gathered(std::size_t(n), 0);
    EXPECT_NCCL_OK(ncclGroupStart());
    EXPECT_NCCL_OK(ncclAllReduce(&mine, &sum, 1, ncclUint32, ncclSum, comm, 0));
    EXPECT_NCCL_OK(ncclGroupStart());
    EXPECT_NCCL_OK(ncclAllGather(&mine, gathered.data(), 1, ncclUint32, comm, 0));
    EXPECT_NCCL_OK(ncclGroupEnd());
    EXPECT_TRUE_OR_FAIL(sum == 0);  // still queued: the outer group has not ended
    EXPECT_NCCL_OK(ncclGroupEnd());
    EXPECT_TRUE_OR_FAIL(sum == std::uint32_t(n * (n + 1) / 2));
    for (int p = 0; p < n; ++p) EXPECT_TRUE_OR_FAIL(gathered[std::size_t(p)] == std::uint32_t(p + 1));
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST_P(NcclEmuRanks, SplitEvenOddThenShrink) {
  EXPECT_TRUE(run_ranks(GetParam(), [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    EXPECT_NCCL_OK(ncclCommInitRankConfig(&comm, n, id, rank, &config));
    ncclResult_t async = ncclInProgress;
    EXPECT_NCCL_OK(ncclCommGetAsyncError(comm, &async));
    EXPECT_TRUE_OR_FAIL(async == ncclSuccess);

    // Even and odd ranks, each in reverse parent order (key = -rank).
    ncclComm_t half;
    EXPECT_NCCL_OK(ncclCommSplit(comm, rank % 2, -rank, &half, nullptr));
    int half_count = 0, half_rank = -1;
    EXPECT_NCCL_OK(ncclCommCount(half, &half_count));
    EXPECT_NCCL_OK(ncclCommUserRank(half, &half_rank));
    std::vector<int> members;
    for (int p = n - 1; p >= 0; --p)
      if (p % 2 == rank % 2) members.push_back(p);
    EXPECT_TRUE_OR_FAIL(half_count == int(members.size()));
    EXPECT_TRUE_OR_FAIL(members[std::size_t(half_rank)] == rank);
    std::int32_t in = rank, sum = 0;
    EXPECT_NCCL_OK(ncclAllReduce(&in, &sum, 1, ncclInt32, ncclSum, half, 0));
    EXPECT_TRUE_OR_FAIL(sum == std::accumulate(members.begin(), members.end(), 0));

    // No color: no communicator.
    ncclComm_t none = reinterpret_cast<ncclComm_t>(1);
    EXPECT_NCCL_OK(ncclCommSplit(comm, rank == 0 ? NCCL_SPLIT_NOCOLOR : 0, 0, &none, nullptr));
    EXPECT_TRUE_OR_FAIL((rank == 0) == (none == nullptr));

    // Shrink away the last rank, which takes no part.
    if (rank < n - 1) {
      int excluded = n - 1;
      ncclComm_t shrunk;
      EXPECT_NCCL_OK(ncclCommShrink(comm, &excluded, 1, &shrunk, nullptr, NCCL_SHRINK_DEFAULT));
      int shrunk_rank = -1, shrunk_count = 0;
      EXPECT_NCCL_OK(ncclCommUserRank(shrunk, &shrunk_rank));
      EXPECT_NCCL_OK(ncclCommCount(shrunk, &shrunk_count));
      EXPECT_TRUE_OR_FAIL(shrunk_rank == rank && shrunk_count == n - 1);
      EXPECT_NCCL_OK(ncclAllReduce(&in, &sum, 1, ncclInt32, ncclSum, shrunk, 0));
      EXPECT_TRUE_OR_FAIL(sum == (n - 1) * (n - 2) / 2);
      EXPECT_NCCL_OK(ncclCommDestroy(shrunk));
    }
    EXPECT_NCCL_OK(ncclCommDestroy(none));
    EXPECT_NCCL_OK(ncclCommDestroy(half));
    EXPECT_NCCL_OK(ncclCommFinalize(comm));
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

INSTANTIATE_TEST_SUITE_P(Ranks, NcclEmuRanks, ::testing::Values(2, 3, 4),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

TEST(NcclEmu, ReceiveFromSilentPeerTimesOut) {
  EXPECT_TRUE(run_ranks(2, [](int rank, int n, const ncclUniqueId& id) {
    setenv("TOPOCOLL_EMU_TIMEOUT_S", "1", 1);
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    if (rank == 0) {
      std::uint8_t byte = 0;
      EXPECT_TRUE_OR_FAIL(ncclRecv(&byte, 1, ncclUint8, 1, comm, 0) == ncclSystemError);
    }
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST(NcclEmu, MismatchedSizesAreAnError) {
  EXPECT_TRUE(run_ranks(2, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    std::vector<std::uint8_t> buffer(16, 1);
    if (rank == 0) EXPECT_NCCL_OK(ncclSend(buffer.data(), 8, ncclUint8, 1, comm, 0));
    else EXPECT_TRUE_OR_FAIL(ncclRecv(buffer.data(), 16, ncclUint8, 0, comm, 0) == ncclInvalidUsage);
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

// NCCL 2.28 asks an operation's communicator for its asynchronous error, through the
// exported ncclCommGetAsyncError, before it enqueues the operation (ncclCommEnsureReady):
// an interposer's definition (here the test's own, which preempts the library's weak alias
// as LD_PRELOAD would) answers, and the error it reports fails the operation.
std::atomic<int> g_async_error_asked{0};
std::atomic<int> g_injected_async_error{ncclSuccess};

}  // namespace

extern "C" __attribute__((visibility("default"))) ncclResult_t ncclCommGetAsyncError(ncclComm_t comm,
                                                                                    ncclResult_t* error) {
  ++g_async_error_asked;
  const ncclResult_t r = pncclCommGetAsyncError(comm, error);
  if (r == ncclSuccess && g_injected_async_error.load() != ncclSuccess)
    *error = ncclResult_t(g_injected_async_error.load());
  return r;
}

namespace {

TEST(NcclEmu, EveryOperationAsksTheExportedAsyncErrorFirst) {
  EXPECT_TRUE(run_ranks(2, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    std::vector<float> buffer(8, 1.0f);
    g_async_error_asked = 0;
    EXPECT_NCCL_OK(ncclAllReduce(buffer.data(), buffer.data(), 8, ncclFloat32, ncclSum, comm, 0));
    EXPECT_TRUE_OR_FAIL(g_async_error_asked.load() == 1);
    g_injected_async_error = ncclRemoteError;
    EXPECT_TRUE_OR_FAIL(ncclAllReduce(buffer.data(), buffer.data(), 8, ncclFloat32, ncclSum, comm, 0) ==
                        ncclRemoteError);
    EXPECT_TRUE_OR_FAIL(ncclSend(buffer.data(), 8, ncclFloat32, 1 - rank, comm, 0) == ncclRemoteError);
    EXPECT_TRUE_OR_FAIL(ncclAllGather(buffer.data(), buffer.data(), 4, ncclFloat32, comm, 0) == ncclRemoteError);
    // So do the queries, a split, a shrink and a finalize (init.cc ncclCommEnsureReady).
    int value = -1;
    ncclComm_t child = nullptr;
    int excluded = 1 - rank;
    EXPECT_TRUE_OR_FAIL(ncclCommCount(comm, &value) == ncclRemoteError && value == -1);
    EXPECT_TRUE_OR_FAIL(ncclCommUserRank(comm, &value) == ncclRemoteError && value == -1);
    EXPECT_TRUE_OR_FAIL(ncclCommCuDevice(comm, &value) == ncclRemoteError && value == -1);
    EXPECT_TRUE_OR_FAIL(ncclCommSplit(comm, 0, rank, &child, nullptr) == ncclRemoteError && !child);
    EXPECT_TRUE_OR_FAIL(ncclCommShrink(comm, &excluded, 1, &child, nullptr, NCCL_SHRINK_DEFAULT) == ncclRemoteError);
    EXPECT_TRUE_OR_FAIL(ncclCommFinalize(comm) == ncclRemoteError);
    g_injected_async_error = ncclSuccess;
    EXPECT_NCCL_OK(ncclCommFinalize(comm));
    EXPECT_TRUE_OR_FAIL(ncclCommFinalize(comm) == ncclInvalidArgument);  // finalized already
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

TEST(NcclEmu, VersionAndAliases) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version, 22809);
  EXPECT_EQ(pncclGetVersion(&version), ncclSuccess);
}

// All ranks in this process, driven by one thread: only a group can run them.
TEST(NcclEmu, InitAllGroupedAllReduceOneThread) {
  const int n = 4;
  ncclComm_t comms[n];
  const int devices[n] = {3, 2, 1, 0};
  ASSERT_EQ(ncclCommInitAll(comms, n, devices), ncclSuccess);
  std::vector<std::vector<double>> in(n), out(n);
  for (int r = 0; r < n; ++r) {
    int device = -1, rank = -1;
    EXPECT_EQ(ncclCommCuDevice(comms[r], &device), ncclSuccess);
    EXPECT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    EXPECT_EQ(device, devices[r]);
    EXPECT_EQ(rank, r);
    in[r].assign(100, 0.25 * (r + 1));
    out[r].assign(100, 0.0);
  }
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), 100, ncclFloat64, ncclSum, comms[r], 0),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    for (double v : out[r]) EXPECT_EQ(v, 2.5);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

TEST(NcclEmu, InvalidArgumentsAreRefused) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  float x = 0;
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclDataType_t(12), ncclSum, comms[0], 0), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclRedOp_t(5), comms[0], 0), ncclInvalidArgument);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 2, comms[0], 0), ncclInvalidArgument);
  EXPECT_EQ(ncclAllGather(&x, &x, SIZE_MAX / 2, ncclFloat32, comms[0], 0), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, &x, 1, ncclFloat32, ncclSum, comms[0], 0), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  int device = 0;
  EXPECT_EQ(ncclCommCuDevice(comms[1], &device), ncclSuccess);
  EXPECT_EQ(device, 1);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// NCCL fails a group one of whose operations failed when enqueued (group.h
// ncclGroupErrCheck): its outermost end returns that error and launches none of the group's
// operations; the thread's next group starts clean.
TEST(NcclEmu, AGroupWithAFailedOperationLaunchesNothing) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  float in[2] = {1, 2}, out[2] = {-1, -1}, x = 0;
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(&in[r], &out[r], 1, ncclFloat32, ncclSum, comms[r], 0), ncclSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, nullptr, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);  // an inner end launches nothing and fails nothing
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidArgument);
  EXPECT_EQ(out[0], -1.0f);
  EXPECT_EQ(out[1], -1.0f);
  // A simulated group reports it too; the error is gone after either end.
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 2, comms[0], 0), ncclInvalidArgument);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidArgument);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r)
    ASSERT_EQ(ncclAllReduce(&in[r], &out[r], 1, ncclFloat32, ncclSum, comms[r], 0), ncclSuccess);
  EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[1], 3.0f);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// ncclGroupSimulateEnd launches none of the group's operations but still makes its splits
// (group.cc groupLaunch runs the async jobs, skipping only the launches); a simInfo not made
// from NCCL_SIM_INFO_INITIALIZER fails the group, which then makes nothing.
TEST(NcclEmu, ASimulatedGroupMakesItsSplitsAndLaunchesNothing) {
  EXPECT_TRUE(run_ranks(2, [](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr, child = nullptr;
    EXPECT_NCCL_OK(ncclCommInitRank(&comm, n, id, rank));
    float in = 1.0f, out = -1.0f;
    ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
    EXPECT_NCCL_OK(ncclGroupStart());
    EXPECT_NCCL_OK(ncclCommSplit(comm, 0, rank, &child, nullptr));
    EXPECT_NCCL_OK(ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, comm, 0));
    EXPECT_NCCL_OK(ncclGroupSimulateEnd(&sim));
    EXPECT_TRUE_OR_FAIL(out == -1.0f);  // not launched
    EXPECT_TRUE_OR_FAIL(child != nullptr);
    EXPECT_NCCL_OK(ncclAllReduce(&in, &out, 1, ncclFloat32, ncclSum, child, 0));
    EXPECT_TRUE_OR_FAIL(out == 2.0f);
    EXPECT_NCCL_OK(ncclCommDestroy(child));
    ncclSimInfo_t raw{};
    child = nullptr;
    EXPECT_NCCL_OK(ncclGroupStart());
    EXPECT_NCCL_OK(ncclCommSplit(comm, 0, rank, &child, nullptr));
    EXPECT_TRUE_OR_FAIL(ncclGroupSimulateEnd(&raw) == ncclInvalidArgument);
    EXPECT_TRUE_OR_FAIL(child == nullptr);
    EXPECT_NCCL_OK(ncclCommDestroy(comm));
    return true;
  }));
}

// ncclCommRevoke as NCCL 2.28's: the communicator's operations are refused from then on
// (inside a group, failing it), it counts as finalized, and a second revoke is refused.
TEST(NcclEmu, ARevokedCommunicatorRefusesItsOperations) {
  ncclComm_t comms[2];
  ASSERT_EQ(ncclCommInitAll(comms, 2, nullptr), ncclSuccess);
  float x = 1.0f;
  EXPECT_EQ(ncclCommRevoke(comms[0], 1), ncclInvalidArgument);
  EXPECT_EQ(ncclCommRevoke(nullptr, NCCL_REVOKE_DEFAULT), ncclSuccess);
  ASSERT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclSuccess);
  EXPECT_EQ(ncclCommRevoke(comms[0], NCCL_REVOKE_DEFAULT), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], 0), ncclInvalidUsage);
  EXPECT_EQ(ncclSend(&x, 1, ncclFloat32, 1, comms[0], 0), ncclInvalidUsage);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  EXPECT_EQ(ncclAllReduce(&x, &x, 1, ncclFloat32, ncclSum, comms[0], 0), ncclInvalidUsage);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_EQ(ncclCommFinalize(comms[0]), ncclInvalidArgument);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// One element of `type` holding a small positive integer v (1..5), encoded by hand for the
// types C++ has no arithmetic for.
void store_small(ncclDataType_t type, std::byte* at, int v) {
  static constexpr std::uint16_t kHalf[] = {0, 0x3C00, 0x4000, 0x4200, 0x4400, 0x4500};
  static constexpr std::uint16_t kBf16[] = {0, 0x3F80, 0x4000, 0x4040, 0x4080, 0x40A0};
  static constexpr std::uint8_t kE4M3[] = {0, 0x38, 0x40, 0x44, 0x48, 0x4A};
  static constexpr std::uint8_t kE5M2[] = {0, 0x3C, 0x40, 0x42, 0x44, 0x45};
  const auto put = [&](auto value) { std::memcpy(at, &value, sizeof value); };
  switch (type) {
    case ncclInt8: put(std::int8_t(v)); break;
    case ncclUint8: put(std::uint8_t(v)); break;
    case ncclInt32: put(std::int32_t(v)); break;
    case ncclUint32: put(std::uint32_t(v)); break;
    case ncclInt64: put(std::int64_t(v)); break;
    case ncclUint64: put(std::uint64_t(v)); break;
    case ncclFloat16: put(kHalf[v]); break;
    case ncclFloat32: put(float(v)); break;
    case ncclFloat64: put(double(v)); break;
    case ncclBfloat16: put(kBf16[v]); break;
    case ncclFloat8e4m3: put(kE4M3[v]); break;
    case ncclFloat8e5m2: put(kE5M2[v]); break;
    default: break;
  }
}

// 11 ranks (more than one reduce_cpu call can take), every datatype and op: every rank's
// result is bitwise the left-to-right fold over ranks 0..10 (floating avg: of the inputs
// pre-multiplied by 1/11, NCCL's PreMulSum), then the op's finalize.
TEST(NcclEmu, EveryDatatypeAndOpFoldsInRankOrder) {
  namespace k = topocoll::kernels;
  const int n = 11;
  const std::size_t count = 7;
  std::vector<ncclComm_t> comms(n);
  ASSERT_EQ(ncclCommInitAll(comms.data(), n, nullptr), ncclSuccess);
  for (int t = 0; t < int(ncclNumTypes); ++t) {
    const auto type = ncclDataType_t(t);
    const std::size_t size = k::datatype_size(k::DataType(t));
    for (int o = 0; o < int(ncclNumOps); ++o) {
      const auto op = ncclRedOp_t(o);
      std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(count * size)),
          out(n, std::vector<std::byte>(count * size));
      for (int r = 0; r < n; ++r)
        for (std::size_t i = 0; i < count; ++i)
          store_small(type, in[r].data() + i * size, int((std::size_t(r) * 3 + i) % 5) + 1);
      std::vector<std::vector<std::byte>> folded = in;
      if (op == ncclAvg)
        for (auto& x : folded) k::avg_premul_cpu(k::DataType(t), x.data(), x.data(), count, n);
      std::vector<std::byte> want = folded[0];
      for (int r = 1; r < n; ++r) {
        const void* sources[2] = {want.data(), folded[r].data()};
        k::reduce_cpu(k::DataType(t), k::ReduceOp(o), want.data(), sources, 2, count);
      }
      k::finalize_cpu(k::DataType(t), k::ReduceOp(o), want.data(), count, n);

      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      for (int r = 0; r < n; ++r)
        ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), count, type, op, comms[r], 0),
                  ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      for (int r = 0; r < n; ++r)
        EXPECT_EQ(std::memcmp(out[r].data(), want.data(), want.size()), 0)
            << "type " << t << " op " << o << " rank " << r;
    }
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// Under capture the allreduce is recorded, not run; each graph launch runs it on the
// buffers' contents at that time.
TEST(NcclEmu, CapturedAllReduceRunsAtEachLaunch) {
  const int n = 2;
  ncclComm_t comms[n];
  ASSERT_EQ(ncclCommInitAll(comms, n, nullptr), ncclSuccess);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  float* buffers[n];
  for (float*& b : buffers) {
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&b), 4 * sizeof(float)), cudaSuccess);
    std::fill(b, b + 4, 1.0f);
  }
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(ncclAllReduce(buffers[r], buffers[r], 4, ncclFloat32, ncclSum, comms[r], stream),
              ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  for (float* b : buffers) EXPECT_EQ(b[0], 1.0f);  // recorded, not run
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int launch = 1; launch <= 2; ++launch) {
    for (int r = 0; r < n; ++r) std::fill(buffers[r], buffers[r] + 4, float(launch * (r + 1)));
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    for (float* b : buffers)
      for (int i = 0; i < 4; ++i) EXPECT_EQ(b[i], float(launch * 3)) << "launch " << launch;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  for (float* b : buffers) EXPECT_EQ(cudaFree(b), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// A replayed receive that times out has no caller to return to: the process ends with
// the message (topocoll::emu::fail), it does not hang.
TEST(NcclEmuDeathTest, FailureDuringGraphReplayEndsTheProcess) {
  EXPECT_DEATH(
      {
        setenv("TOPOCOLL_EMU_TIMEOUT_S", "1", 1);
        ncclComm_t comms[2];
        if (ncclCommInitAll(comms, 2, nullptr) != ncclSuccess) std::exit(0);
        cudaStream_t stream;
        cudaStreamCreate(&stream);
        std::uint8_t byte = 0;
        cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
        if (ncclRecv(&byte, 1, ncclUint8, 1, comms[0], stream) != ncclSuccess) std::exit(0);
        cudaGraph_t graph;
        cudaStreamEndCapture(stream, &graph);
        cudaGraphExec_t exec;
        cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphLaunch(exec, stream);  // rank 1 never sends
        std::exit(0);
      },
      "timed out after 1 s");
}

}  // namespace

// NCCL joins the streams of a group per communicator (2.28 enqueue.cc ncclLaunchPrepare:
// the communicator's planner->streams): a communicator's operation on stream b starts after
// the work queued before the group on stream a only when the same communicator has an
// operation on a in the group. Another communicator's operation on a orders nothing.
class NcclEmuStreams : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(ncclCommInitAll(comms_, 2, nullptr), ncclSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking), cudaSuccess);
    for (float*& p : buffers_) ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&p), 4 * sizeof(float)), cudaSuccess);
  }
  void TearDown() override {
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (float* p : buffers_) cudaFree(p);
    cudaStreamDestroy(b_);
    cudaStreamDestroy(a_);
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }
  // Rank r's allreduce of 4 floats in place on buffer `k`, on `stream`.
  ncclResult_t reduce(int r, int k, cudaStream_t stream) {
    return ncclAllReduce(buffers_[k], buffers_[k], 4, ncclFloat32, ncclSum, comms_[r], stream);
  }
  ncclComm_t comms_[2] = {};
  cudaStream_t a_ = nullptr, b_ = nullptr;
  float* buffers_[4] = {};
};

TEST_F(NcclEmuStreams, OneCommunicatorsStreamsAreJoined) {
  ASSERT_EQ(cudaMemsetAsync(buffers_[1], 0, 4 * sizeof(float), a_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(buffers_[3], 0, 4 * sizeof(float), a_), cudaSuccess);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(reduce(r, 2 * r, a_), ncclSuccess);
    ASSERT_EQ(reduce(r, 2 * r + 1, b_), ncclSuccess);  // reads what stream a wrote before
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
}

TEST_F(NcclEmuStreams, AnotherCommunicatorsStreamIsNotJoined) {
  EXPECT_DEATH(
      {
        cudaMemsetAsync(buffers_[1], 0, 4 * sizeof(float), a_);
        ncclGroupStart();
        reduce(0, 0, a_);
        reduce(1, 1, b_);  // rank 1's communicator has nothing on a
        ncclGroupEnd();
      },
      "stream-ordering race(.|\n)*cudaMemsetAsync");
}
