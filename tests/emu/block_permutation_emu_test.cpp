// Blocks permuted between the user's rank order and the topology-ordered communicator's:
// right bytes in both directions, and issued as batched copy-kernel launches rather than
// one cudaMemcpyAsync per run of consecutive ranks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/copy_ranges_cuda.h"
#include "plugin/interposer/block_permutation.h"
#include "tests/emu/emu_runtime.h"

namespace topocoll::plugin::interposer {
namespace {

TEST(BlockPermutationEmu, OneCopyKernelLaunchNotOneMemcpyPerRun) {
  // 8 ranks in a ring order with 6 runs of consecutive ranks: {3}, {0,1}, {7}, {4}, {2}, {5,6}.
  const std::vector<int> order = {3, 0, 1, 7, 4, 2, 5, 6};
  const std::size_t block = 40, n = order.size();
  char *user = nullptr, *ring = nullptr, *back = nullptr;
  ASSERT_EQ(cudaMalloc(&user, n * block), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ring, n * block), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&back, n * block), cudaSuccess);
  std::vector<char> host(n * block);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = char(i / block * 16 + i % 7);
  ASSERT_EQ(cudaMemcpy(user, host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the legacy stream's copy before ours
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  const long memcpys = emu::event_count("cudaMemcpyAsync");
  const long launches = emu::event_count("copy_ranges launch");
  ASSERT_EQ(permute_blocks(order, true, user, ring, block, stream), cudaSuccess);
  ASSERT_EQ(permute_blocks(order, false, back, ring, block, stream), cudaSuccess);
  EXPECT_EQ(emu::event_count("cudaMemcpyAsync"), memcpys) << "one cudaMemcpyAsync per run";
  EXPECT_EQ(emu::event_count("copy_ranges launch") - launches, 2) << "one launch per permutation";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  std::vector<char> got(n * block);
  ASSERT_EQ(cudaMemcpy(got.data(), ring, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  for (std::size_t j = 0; j < n; ++j)
    for (std::size_t b = 0; b < block; ++b)
      ASSERT_EQ(got[j * block + b], host[std::size_t(order[j]) * block + b]) << "ring block " << j;
  ASSERT_EQ(cudaMemcpy(got.data(), back, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(got, host) << "allgather direction does not invert the reduce-scatter one";
  cudaStreamDestroy(stream);
  cudaFree(user);
  cudaFree(ring);
  cudaFree(back);
}

}  // namespace
}  // namespace topocoll::plugin::interposer
