// Served calls that go wrong, on the emulation with the interposer linked in front of the
// emulated NCCL (as LD_PRELOAD puts it), in forked ranks:
// - a collective that fails part-way: the steps already queued keep using the communicator's
//   device scratch, so freeing it (the abort a job makes next) must still wait for them (the
//   emulated runtime's race detector, emu_runtime.h, aborts the rank otherwise);
// - a buffer NCCL_CHECK_POINTERS makes NCCL refuse: refused as NCCL refuses it, nothing run.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/emu/emu_runtime.h"
#include "tests/emu/forked_ranks.h"

namespace {

using topocoll::emu::testing::run_ranks;

// Every rank's first reduce kernel of the schedule fails (after step 0's transfer wrote the
// scratch), so no rank waits for a peer that stopped; each then aborts its communicator.
// A rank as host s<rank> of the topology, its communicator and two device buffers.
struct Rank {
  static constexpr std::size_t kCount = std::size_t(1) << 16;
  ncclComm_t comm = nullptr;
  float *send = nullptr, *recv = nullptr;
  bool start(int rank, int nranks, const ncclUniqueId& id) {
    ::setenv("NCCL_HOSTID", ("s" + std::to_string(rank)).c_str(), 1);
    CHECK_OR_FAIL(ncclCommInitRank(&comm, nranks, id, rank) == ncclSuccess, "init");
    CHECK_OR_FAIL(cudaMalloc(reinterpret_cast<void**>(&send), kCount * sizeof(float)) == cudaSuccess, "malloc");
    CHECK_OR_FAIL(cudaMalloc(reinterpret_cast<void**>(&recv), kCount * sizeof(float)) == cudaSuccess, "malloc");
    return true;
  }
  ~Rank() {
    cudaFree(send);
    cudaFree(recv);
  }
};

bool fail_mid_schedule_then_abort(int rank, int nranks, const ncclUniqueId& id, bool destroy) {
  Rank me;
  if (!me.start(rank, nranks, id)) return false;
  const std::size_t count = Rank::kCount;
  ncclComm_t comm = me.comm;
  float *send = me.send, *recv = me.recv;
  cudaStream_t stream = nullptr;
  CHECK_OR_FAIL(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) == cudaSuccess, "stream");
  CHECK_OR_FAIL(cudaMemsetAsync(send, 0, count * sizeof(float), stream) == cudaSuccess, "memset");
  topocoll::emu::fail_next_call("reduce_cuda", cudaErrorLaunchFailure);
  const ncclResult_t r = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, stream);
  // The injected failure taken is the proof that topocoll's schedule served the call.
  CHECK_OR_FAIL(topocoll::emu::take_injected_failure("reduce_cuda") == cudaSuccess,
                "the allreduce was not served by a schedule (returned %d)", int(r));
  CHECK_OR_FAIL(r != ncclSuccess, "a failed reduce kernel must fail the call");
  // The scratch goes with the communicator: its free must follow the failed call's steps.
  CHECK_OR_FAIL((destroy ? ncclCommDestroy(comm) : ncclCommAbort(comm)) == ncclSuccess, "release");
  cudaStreamDestroy(stream);
  return true;
}

// Read once per process (the parent's first NCCL call reads the interposer's settings,
// which the forked ranks inherit): the same for every test.
class FailedBatchEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    ::setenv("TOPOCOLL_TOPO_FILE", TOPOCOLL_SOURCE_DIR "/examples/bigraph-32.json", 1);
    ::setenv("TOPOCOLL_ALGO", "hd", 1);
    ::setenv("TOPOCOLL_EMU_TIMEOUT_S", "20", 1);
    ::setenv("NCCL_CHECK_POINTERS", "1", 1);
  }
};
using CheckedPointersEmu = FailedBatchEmu;

TEST_F(FailedBatchEmu, AnAbortAfterAScheduleFailedMidwayFreesTheScratchAfterItsSteps) {
  EXPECT_TRUE(run_ranks(2, [](int rank, int n, const ncclUniqueId& id) {
    return fail_mid_schedule_then_abort(rank, n, id, false);
  }, std::chrono::seconds(60)));
}

TEST_F(FailedBatchEmu, ADestroyAfterAScheduleFailedMidwayFreesTheScratchAfterItsSteps) {
  EXPECT_TRUE(run_ranks(4, [](int rank, int n, const ncclUniqueId& id) {
    return fail_mid_schedule_then_abort(rank, n, id, true);
  }, std::chrono::seconds(60)));
}

// With NCCL_CHECK_POINTERS=1 NCCL refuses a host buffer before anything runs (argcheck.cc);
// a schedule would have launched on it (the emulated kernel aborts on memory outside every
// allocation). Refused on every rank, the communicator then serves the next call.
bool host_buffer_refused_then_served(int rank, int nranks, const ncclUniqueId& id) {
  Rank me;
  if (!me.start(rank, nranks, id)) return false;
  const std::size_t count = Rank::kCount;
  ncclComm_t comm = me.comm;
  float *send = me.send, *recv = me.recv;
  CHECK_OR_FAIL(cudaMemset(send, 0, count * sizeof(float)) == cudaSuccess, "memset");
  std::vector<float> host(count);
  const ncclResult_t refused = ncclAllReduce(send, host.data(), count, ncclFloat32, ncclSum, comm, nullptr);
  CHECK_OR_FAIL(refused == ncclInvalidArgument, "a host receive buffer gave %d, not ncclInvalidArgument",
                int(refused));
  topocoll::emu::fail_next_call("reduce_cuda", cudaErrorLaunchFailure);  // taken only if served
  const ncclResult_t served = ncclAllReduce(send, recv, count, ncclFloat32, ncclSum, comm, nullptr);
  CHECK_OR_FAIL(topocoll::emu::take_injected_failure("reduce_cuda") == cudaSuccess && served != ncclSuccess,
                "the next call was not served by a schedule (returned %d)", int(served));
  CHECK_OR_FAIL(ncclCommAbort(comm) == ncclSuccess, "abort");
  return true;
}

TEST_F(CheckedPointersEmu, AHostBufferIsRefusedAsNcclRefusesItAndNothingRuns) {
  EXPECT_TRUE(run_ranks(2, host_buffer_refused_then_served, std::chrono::seconds(60)));
}

}  // namespace
