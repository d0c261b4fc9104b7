// The interposer's device scratch on the emulated CUDA runtime: freeing never waits for the
// whole device (an abort must return while another communicator's kernel is stuck), frees
// are ordered after the scratch's last uses (the emulation's race detector checks that),
// growth does not keep every old buffer, and no CUDA probe leaves an error behind for the
// application's next cudaGetLastError.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_scratch.h"
#include "tests/emu/emu_runtime.h"

namespace topocoll::plugin::interposer {
namespace {

struct Stream {
  Stream() { EXPECT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
  cudaStream_t s = nullptr;
};

// One use of the scratch on `stream`, as a collective's kernels would make.
void use(DeviceScratch& scratch, std::size_t bytes, cudaStream_t stream) {
  void* p = scratch.reserve(bytes);
  ASSERT_NE(p, nullptr);
  scratch.order_after_previous(stream);
  ASSERT_EQ(cudaMemsetAsync(p, 1, bytes, stream), cudaSuccess);
  scratch.mark_used({stream});
}

// Whether a batch votes on growth follows the capacity the ranks agreed on, not this rank's
// own: growing here (the allocation succeeded) agrees nothing until agree() is called after
// a vote every rank won, and every rank's own capacity then holds the agreed one.
TEST(DeviceScratchEmu, OnlyAWonVoteRaisesTheAgreedCapacity) {
  DeviceScratch scratch(0);
  const std::size_t three_mib = std::size_t(3) << 20;
  ASSERT_NE(scratch.reserve(three_mib), nullptr);
  EXPECT_TRUE(scratch.fits(three_mib));
  EXPECT_FALSE(scratch.agreed_fits(three_mib)) << "grown here, not agreed: the next batch votes again";
  scratch.agree(three_mib);
  EXPECT_TRUE(scratch.agreed_fits(three_mib));
  EXPECT_TRUE(scratch.agreed_fits(std::size_t(4) << 20)) << "agreed as the ranks grow: 4 MiB";
  EXPECT_FALSE(scratch.agreed_fits((std::size_t(4) << 20) + 1));
  EXPECT_GE(scratch.capacity(), std::size_t(4) << 20);
  EXPECT_EQ(DeviceScratch::grown_capacity(0, 1), std::size_t(1) << 20);
  EXPECT_EQ(DeviceScratch::grown_capacity(std::size_t(8) << 20, std::size_t(3) << 20), std::size_t(8) << 20);
  EXPECT_EQ(DeviceScratch::grown_capacity(std::size_t(1) << 20, (std::size_t(16) << 20) + 1), std::size_t(32) << 20);
}

TEST(DeviceScratchEmu, DestroyFreesAfterTheLastUses) {
  const std::size_t before = emu::live_device_bytes();
  Stream a, b;
  {
    DeviceScratch scratch(0);
    use(scratch, 1000, a.s);
    use(scratch, 1000, b.s);
  }  // the communicator goes (destroy or abort): frees ordered after both streams' uses
  EXPECT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
  EXPECT_EQ(emu::live_device_bytes(), before) << "the scratch's memory was not freed";
}

TEST(DeviceScratchEmu, NoDeviceWideWaitOnDestroy) {
  Stream a;
  auto scratch = std::make_unique<DeviceScratch>(0);
  use(*scratch, 4096, a.s);
  const long syncs = emu::device_synchronization_count();
  scratch.reset();
  EXPECT_EQ(emu::device_synchronization_count(), syncs)
      << "destroying the scratch synchronised the whole device (cudaFree)";
}

// Without an event to wait on (cudaStreamWaitEvent failed), the next stream's use waits for
// the last one on the host instead of racing it (the race detector would abort).
TEST(DeviceScratchEmu, AFailedStreamWaitIsWaitedOutOnTheHost) {
  Stream a, b;
  DeviceScratch scratch(0);
  use(scratch, 1000, a.s);
  emu::fail_next_call("cudaStreamWaitEvent", cudaErrorLaunchFailure);
  use(scratch, 1000, b.s);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failure was left for the application";
  EXPECT_EQ(cudaStreamSynchronize(b.s), cudaSuccess);
}

// cudaStreamPerThread is one handle for a different stream in each thread: a communicator
// used from two threads in turn (NCCL allows it, the calls serialised) on that handle is
// used on two streams, and the second use must wait for the first (the race detector
// aborts otherwise).
TEST(DeviceScratchEmu, ThePerThreadStreamOfAnotherThreadIsWaitedFor) {
  DeviceScratch scratch(0);
  std::thread([&] { use(scratch, 1000, cudaStreamPerThread); }).join();
  std::thread([&] { use(scratch, 1000, cudaStreamPerThread); }).join();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(DeviceScratchEmu, GrowthFreesTheOldEagerBuffer) {
  Stream a;
  const std::size_t before = emu::live_device_bytes();
  DeviceScratch scratch(0);
  use(scratch, 1 << 20, a.s);
  use(scratch, 4 << 20, a.s);
  use(scratch, 16 << 20, a.s);
  ASSERT_EQ(cudaStreamSynchronize(a.s), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(emu::live_device_bytes() - before, std::size_t(16) << 20)
      << "grown-out buffers are kept";
}

TEST(DeviceScratchEmu, CaptureProbeLeavesNoErrorBehind) {
  Stream capturing;
  ASSERT_EQ(cudaStreamBeginCapture(capturing.s, cudaStreamCaptureModeGlobal), cudaSuccess);
  // The legacy stream's capture query fails while another stream captures in global mode.
  EXPECT_FALSE(stream_capturing(nullptr));
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a failed CUDA query left its error behind";
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(capturing.s, &graph), cudaSuccess);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
