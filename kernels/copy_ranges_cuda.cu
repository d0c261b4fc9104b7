// Multi-range copy: blockIdx.y picks the range, blockIdx.x strides within it; the per-thread
// work (widest word the dst - src distance allows) is copy_range_thread in thread_loops.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/copy_ranges_cuda.h"
#include "kernels/device_occupancy.h"
#include "kernels/launch_arguments.h"
#include "kernels/thread_loops.h"

namespace topocoll::kernels {
namespace {

constexpr int kCopyBlockThreads = 256;
constexpr int kOccupancySlotCopy = kOccupancySlots - 1;

struct CopyBatch {
  CopyRange r[kMaxCopyRangesPerLaunch];
};

__global__ void __launch_bounds__(kCopyBlockThreads)
    copy_ranges_kernel(const __grid_constant__ CopyBatch b) {
  const CopyRange& r = b.r[blockIdx.y];
  copy_range_thread(r.dst, r.src, r.bytes,
                    static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x,
                    static_cast<std::size_t>(gridDim.x) * blockDim.x);
}

cudaError_t launch_batch(const CopyBatch& batch, int n, std::size_t max_bytes,
                         cudaStream_t stream) {
  int resident = 0;
  if (const cudaError_t e = max_resident_blocks(reinterpret_cast<const void*>(copy_ranges_kernel),
                                                kCopyBlockThreads, kOccupancySlotCopy, &resident);
      e != cudaSuccess)
    return e;
  // The resident blocks are shared among the ranges; no more than the largest range can use.
  const std::size_t wanted = (max_bytes / 16 + kCopyBlockThreads) / kCopyBlockThreads;
  std::size_t per_range = static_cast<std::size_t>(resident) / static_cast<std::size_t>(n);
  if (per_range > wanted) per_range = wanted;
  if (per_range == 0) per_range = 1;
  void* args[] = {const_cast<CopyBatch*>(&batch)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(copy_ranges_kernel),
                          dim3(static_cast<unsigned>(per_range), static_cast<unsigned>(n)),
                          dim3(kCopyBlockThreads), args, 0, stream);
}

}  // namespace

cudaError_t copy_ranges_cuda(const CopyRange* ranges, int n, cudaStream_t stream) {
  if (const Launch l = check_copy_ranges(ranges, n); l != Launch::Run)
    return l == Launch::Nothing ? cudaSuccess : cudaErrorInvalidValue;
  int nonempty = 0;
  const CopyRange* only = nullptr;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    ++nonempty;
    only = &ranges[i];
  }
  // Default: the kind follows the pointers (unified addressing), as the batch kernel's loads
  // do; a user buffer in mapped host or managed memory is then no undefined copy.
  if (nonempty == 1) return cudaMemcpyAsync(only->dst, only->src, only->bytes, cudaMemcpyDefault, stream);
  CopyBatch batch{};
  int in_batch = 0;
  std::size_t max_bytes = 0;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    batch.r[in_batch++] = ranges[i];
    if (ranges[i].bytes > max_bytes) max_bytes = ranges[i].bytes;
    if (in_batch == kMaxCopyRangesPerLaunch) {
      if (const cudaError_t e = launch_batch(batch, in_batch, max_bytes, stream); e != cudaSuccess)
        return e;
      in_batch = 0;
      max_bytes = 0;
    }
  }
  return in_batch > 0 ? launch_batch(batch, in_batch, max_bytes, stream) : cudaSuccess;
}

}  // namespace topocoll::kernels
