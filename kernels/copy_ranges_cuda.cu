// Multi-range copy: blockIdx.y picks the range, blockIdx.x strides within it. Each range moves
// in the widest word (16/8/4/2/1 bytes) that its dst - src distance allows, with a byte head
// up to the first aligned destination and a byte tail.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/copy_ranges_cuda.h"
#include "kernels/device_occupancy.h"

namespace topocoll::kernels {
namespace {

constexpr int kBlockThreads = 256;
constexpr int kUnroll = 4;
constexpr int kOccupancySlotCopy = kOccupancySlots - 1;

struct CopyBatch {
  CopyRange r[kMaxCopyRangesPerLaunch];
};

template <class W>
__device__ __forceinline__ void copy_words(W* dst, const W* src, std::size_t n, std::size_t tid,
                                           std::size_t nthreads) {
  std::size_t i = tid;
  for (; i + (kUnroll - 1) * nthreads < n; i += kUnroll * nthreads) {
    W w[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) w[k] = src[i + k * nthreads];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) dst[i + k * nthreads] = w[k];
  }
  for (; i < n; i += nthreads) dst[i] = src[i];
}

template <class W>
__device__ __forceinline__ void copy_aligned(char* d, const char* s, std::size_t bytes,
                                             std::size_t tid, std::size_t nthreads) {
  constexpr std::size_t w = sizeof(W);
  std::size_t head = (w - reinterpret_cast<std::uintptr_t>(d) % w) % w;
  if (head > bytes) head = bytes;
  if (tid < head) d[tid] = s[tid];
  const std::size_t words = (bytes - head) / w;
  copy_words(reinterpret_cast<W*>(d + head), reinterpret_cast<const W*>(s + head), words, tid,
             nthreads);
  const std::size_t done = head + words * w;
  if (tid < bytes - done) d[done + tid] = s[done + tid];
}

__global__ void __launch_bounds__(kBlockThreads) copy_ranges_kernel(const __grid_constant__ CopyBatch b) {
  const CopyRange r = b.r[blockIdx.y];
  const std::size_t nthreads = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  char* d = static_cast<char*>(r.dst);
  const char* s = static_cast<const char*>(r.src);
  // Widest word size dividing dst - src: both ends are then aligned after the same head.
  const std::uintptr_t dist = reinterpret_cast<std::uintptr_t>(d) - reinterpret_cast<std::uintptr_t>(s);
  if (dist % 16 == 0) copy_aligned<uint4>(d, s, r.bytes, tid, nthreads);
  else if (dist % 8 == 0) copy_aligned<uint2>(d, s, r.bytes, tid, nthreads);
  else if (dist % 4 == 0) copy_aligned<std::uint32_t>(d, s, r.bytes, tid, nthreads);
  else if (dist % 2 == 0) copy_aligned<std::uint16_t>(d, s, r.bytes, tid, nthreads);
  else copy_words(d, s, r.bytes, tid, nthreads);
}

cudaError_t launch_batch(const CopyBatch& batch, int n, std::size_t max_bytes,
                         cudaStream_t stream) {
  int resident = 0;
  if (const cudaError_t e = max_resident_blocks(reinterpret_cast<const void*>(copy_ranges_kernel),
                                                kBlockThreads, kOccupancySlotCopy, &resident);
      e != cudaSuccess)
    return e;
  // The resident blocks are shared among the ranges; no more than the largest range can use.
  const std::size_t wanted = (max_bytes / 16 + kBlockThreads) / kBlockThreads;
  std::size_t per_range = static_cast<std::size_t>(resident) / static_cast<std::size_t>(n);
  if (per_range > wanted) per_range = wanted;
  if (per_range == 0) per_range = 1;
  void* args[] = {const_cast<CopyBatch*>(&batch)};
  return cudaLaunchKernel(reinterpret_cast<const void*>(copy_ranges_kernel),
                          dim3(static_cast<unsigned>(per_range), static_cast<unsigned>(n)),
                          dim3(kBlockThreads), args, 0, stream);
}

}  // namespace

cudaError_t copy_ranges_cuda(const CopyRange* ranges, int n, cudaStream_t stream) {
  if (n < 0 || (n > 0 && ranges == nullptr)) return cudaErrorInvalidValue;
  int nonempty = 0;
  const CopyRange* only = nullptr;
  for (int i = 0; i < n; ++i) {
    if (ranges[i].bytes == 0) continue;
    if (ranges[i].dst == nullptr || ranges[i].src == nullptr) return cudaErrorInvalidValue;
    ++nonempty;
    only = &ranges[i];
  }
  if (nonempty == 0) return cudaSuccess;
  if (nonempty == 1)
    return cudaMemcpyAsync(only->dst, only->src, only->bytes, cudaMemcpyDeviceToDevice, stream);
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
