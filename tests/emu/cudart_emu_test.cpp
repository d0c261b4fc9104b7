// The emulated CUDA runtime's stream-ordering race detector (cudart_emu.cpp): work on two
// streams touching the same device bytes, at least one writing, must be ordered by an event
// or a synchronisation, or the process dies naming both accesses.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "tests/emu/emu_runtime.h"

namespace {

constexpr const char* kRace = "stream-ordering race";

// Two non-blocking streams, an event and a 4 KiB allocation.
class CudartEmu : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&a_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&b_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&e_, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&buf_, kBytes), cudaSuccess);
  }
  void TearDown() override {
    cudaFree(buf_);
    cudaEventDestroy(e_);
    cudaStreamDestroy(b_);
    cudaStreamDestroy(a_);
  }
  char* at(std::size_t offset) { return static_cast<char*>(buf_) + offset; }

  static constexpr std::size_t kBytes = 4096;
  cudaStream_t a_ = nullptr, b_ = nullptr;
  cudaEvent_t e_ = nullptr;
  void* buf_ = nullptr;
};

TEST_F(CudartEmu, TwoStreamsWritingOneRangeWithoutAnEventRace) {
  EXPECT_DEATH(
      {
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaMemsetAsync(at(128), 2, 256, b_);
      },
      "stream-ordering race(.|\n)*cudaMemsetAsync wrote bytes \\[0, 256\\)(.|\n)*"
      "cudaMemsetAsync writes bytes \\[128, 384\\)");
}

TEST_F(CudartEmu, AReadAfterAnUnorderedWriteRaces) {
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, kBytes), cudaSuccess);
  EXPECT_DEATH(
      {
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaMemcpyAsync(other, at(0), 256, cudaMemcpyDeviceToDevice, b_);
      },
      "cudaMemcpyAsync source reads");
  cudaFree(other);
}

TEST_F(CudartEmu, AWriteAfterAnUnorderedReadRaces) {
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, kBytes), cudaSuccess);
  EXPECT_DEATH(
      {
        cudaMemcpyAsync(other, at(0), 256, cudaMemcpyDeviceToDevice, a_);
        cudaMemsetAsync(at(0), 1, 256, b_);
      },
      kRace);
  cudaFree(other);
}

TEST_F(CudartEmu, AnEventOrdersTheStreams) {
  cudaMemsetAsync(at(0), 1, 256, a_);
  ASSERT_EQ(cudaEventRecord(e_, a_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b_, e_, 0), cudaSuccess);
  cudaMemsetAsync(at(0), 2, 256, b_);
  // And back: stream a waits for b before it writes again.
  ASSERT_EQ(cudaEventRecord(e_, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(a_, e_, 0), cudaSuccess);
  cudaMemsetAsync(at(0), 3, 256, a_);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(*at(0), 3);
}

TEST_F(CudartEmu, AnEventRecordedBeforeTheWriteDoesNotOrderIt) {
  EXPECT_DEATH(
      {
        cudaEventRecord(e_, a_);
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaStreamWaitEvent(b_, e_, 0);
        cudaMemsetAsync(at(0), 2, 256, b_);
      },
      kRace);
}

TEST_F(CudartEmu, OrderIsNotTransitiveWithoutTheEvent) {
  // b waits for a's write; a then writes again, which b's next write does not follow.
  EXPECT_DEATH(
      {
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaEventRecord(e_, a_);
        cudaStreamWaitEvent(b_, e_, 0);
        cudaMemsetAsync(at(0), 2, 256, a_);
        cudaMemsetAsync(at(0), 3, 256, b_);
      },
      kRace);
}

TEST_F(CudartEmu, HostSynchronisationOrdersTheStreams) {
  cudaMemsetAsync(at(0), 1, 256, a_);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  cudaMemsetAsync(at(0), 2, 256, b_);
  ASSERT_EQ(cudaEventRecord(e_, b_), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e_), cudaSuccess);
  cudaMemsetAsync(at(0), 3, 256, a_);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemsetAsync(at(0), 4, 256, b_);
  ASSERT_EQ(cudaStreamSynchronize(b_), cudaSuccess);
  // A synchronous copy to the host is complete when it returns.
  char host[256];
  ASSERT_EQ(cudaMemcpy(host, at(0), sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaMemsetAsync(at(0), 5, 256, a_);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(host[0], 4);
  EXPECT_EQ(*at(0), 5);
}

// cudaMemcpy and cudaMemset run on the legacy stream, which a non-blocking stream neither
// waits for nor is waited for by (CUDA Runtime API, "API synchronization behavior").
TEST_F(CudartEmu, SynchronousCopiesDoNotOrderNonBlockingStreams) {
  char host[256] = {};
  EXPECT_DEATH(
      {
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaMemcpy(host, at(0), sizeof host, cudaMemcpyDeviceToHost);
      },
      "cudaMemsetAsync wrote(.|\n)*cudaMemcpy source reads");
  EXPECT_DEATH(
      {
        cudaMemcpy(at(0), host, sizeof host, cudaMemcpyHostToDevice);
        cudaMemsetAsync(at(0), 1, 256, a_);
      },
      "cudaMemcpy destination wrote");
  EXPECT_DEATH(
      {
        cudaMemset(at(0), 0, 256);
        cudaMemsetAsync(at(0), 1, 256, a_);
      },
      "cudaMemset wrote");
  // Ordered by a synchronisation in between.
  cudaMemset(at(0), 0, 256);
  cudaMemcpy(at(0), host, sizeof host, cudaMemcpyHostToDevice);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemsetAsync(at(0), 1, 256, a_);
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host, at(0), sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 1);
}

TEST_F(CudartEmu, SynchronisingTheOtherStreamDoesNotOrder) {
  EXPECT_DEATH(
      {
        cudaMemsetAsync(at(0), 1, 256, a_);
        cudaStreamSynchronize(b_);
        cudaMemsetAsync(at(0), 2, 256, b_);
      },
      kRace);
}

TEST_F(CudartEmu, ReadsOnTwoStreamsDoNotRace) {
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, kBytes), cudaSuccess);
  char* out = static_cast<char*>(other);
  cudaMemcpyAsync(out, at(0), 256, cudaMemcpyDeviceToDevice, a_);
  cudaMemcpyAsync(out + 256, at(0), 256, cudaMemcpyDeviceToDevice, b_);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(other);
}

TEST_F(CudartEmu, DisjointRangesDoNotRace) {
  cudaMemsetAsync(at(0), 1, 256, a_);
  cudaMemsetAsync(at(256), 2, 256, b_);
  cudaMemsetAsync(at(512), 3, 1, a_);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(*at(255), 1);
  EXPECT_EQ(*at(256), 2);
}

TEST_F(CudartEmu, DistinctAllocationsDoNotRace) {
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, kBytes), cudaSuccess);
  cudaMemsetAsync(at(0), 1, kBytes, a_);
  cudaMemsetAsync(other, 2, kBytes, b_);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(other);
}

TEST_F(CudartEmu, HostMemoryIsNotTracked) {
  static char host[256];
  topocoll::emu::access(host, sizeof host, true, a_, "host write");
  topocoll::emu::access(host, sizeof host, true, b_, "host write");
}

// Captured work touches memory when the graph runs, on the launching stream.
TEST_F(CudartEmu, CapturedWorkIsStampedAtLaunchOnTheLaunchingStream) {
  cudaStream_t c = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&c, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(c, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaMemsetAsync(at(0), 7, 256, c);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(c, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  // Capturing ran nothing: a write on b does not race with it.
  cudaMemsetAsync(at(0), 1, 256, b_);
  ASSERT_EQ(cudaEventRecord(e_, b_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(a_, e_, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, a_), cudaSuccess);  // ordered after b by the event
  ASSERT_EQ(cudaStreamSynchronize(a_), cudaSuccess);
  EXPECT_EQ(*at(0), 7);
  // A second launch on a, then b writes without an event: a race, though the capture
  // stream c never ran anything.
  EXPECT_DEATH(
      {
        cudaGraphLaunch(exec, a_);
        cudaMemsetAsync(at(0), 1, 256, b_);
      },
      "stream-ordering race(.|\n)*on stream #");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(c);
}

// Blocking streams and the legacy default stream wait for each other; non-blocking
// streams do not (CUDA Runtime API, "Stream synchronization behavior").
TEST_F(CudartEmu, TheLegacyStreamOrdersBlockingStreamsOnly) {
  cudaStream_t blocking = nullptr;
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  cudaMemsetAsync(at(0), 1, 256, blocking);
  cudaMemsetAsync(at(0), 2, 256, nullptr);
  cudaMemsetAsync(at(0), 3, 256, blocking);
  EXPECT_DEATH(cudaMemsetAsync(at(0), 4, 256, a_), kRace);
  ASSERT_EQ(cudaStreamSynchronize(blocking), cudaSuccess);
  cudaMemsetAsync(at(0), 5, 256, a_);
  EXPECT_DEATH(cudaMemsetAsync(at(0), 6, 256, nullptr), kRace);
  cudaStreamDestroy(blocking);
}

// A launch joined to several streams (an NCCL group over streams a and b) runs after the
// prior work of both, and the later work of both runs after it; its own accesses on a and
// b are one launch's, unordered among themselves.
TEST_F(CudartEmu, JoinedStreamsAreOrderedWithTheLaunch) {
  const cudaStream_t both[] = {a_, b_};
  cudaMemsetAsync(at(0), 1, 256, a_);
  topocoll::emu::join_streams(both, 2);
  topocoll::emu::access(at(0), 256, true, b_, "joined write on b");
  topocoll::emu::join_streams(both, 2);
  cudaMemsetAsync(at(0), 2, 256, a_);
  EXPECT_DEATH(
      {
        topocoll::emu::join_streams(both, 2);
        topocoll::emu::access(at(0), 256, true, a_, "joined write on a");
        topocoll::emu::access(at(0), 256, true, b_, "joined write on b");
      },
      "joined write on a wrote(.|\n)*joined write on b writes");
}

// Freeing synchronises the device and drops the allocation's history.
TEST_F(CudartEmu, FreeForgetsTheHistory) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, kBytes), cudaSuccess);
  cudaMemsetAsync(p, 1, kBytes, a_);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&p, kBytes), cudaSuccess);
  cudaMemsetAsync(p, 2, kBytes, b_);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
}

}  // namespace
