// Several device-to-device copies in one launch (an allgather step receives or forwards
// several ranges at once). Asynchronous on the caller's stream, no allocation or sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace topocoll::kernels {

struct CopyRange {
  void* dst;
  const void* src;
  std::size_t bytes;
};

// Ranges per kernel launch; longer lists are split into several launches.
inline constexpr int kMaxCopyRangesPerLaunch = 16;

// Copies every range (any alignment, any size; bytes == 0 is skipped). Ranges must not
// overlap each other's destinations or a destination with any source. A single range uses
// cudaMemcpyAsync. The host array is read during the call only.
cudaError_t copy_ranges_cuda(const CopyRange* ranges, int n, cudaStream_t stream);

}  // namespace topocoll::kernels
