#include "kernels/device_occupancy.h"

#include <atomic>

namespace topocoll::kernels {
namespace {
constexpr int kMaxDevices = 64;
std::atomic<int> g_cache[kMaxDevices][kOccupancySlots];  // 0 = not yet known
}  // namespace

cudaError_t max_resident_blocks(const void* kernel, int block_threads, int slot, int* blocks) {
  int device = 0;
  if (const cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const bool cacheable = device >= 0 && device < kMaxDevices && slot >= 0 && slot < kOccupancySlots;
  if (cacheable) {
    const int known = g_cache[device][slot].load(std::memory_order_relaxed);
    if (known > 0) {
      *blocks = known;
      return cudaSuccess;
    }
  }
  int sms = 0, per_sm = 0;
  if (const cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      e != cudaSuccess)
    return e;
  if (const cudaError_t e =
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block_threads, 0);
      e != cudaSuccess)
    return e;
  *blocks = sms * (per_sm > 0 ? per_sm : 1);
  if (cacheable) g_cache[device][slot].store(*blocks, std::memory_order_relaxed);
  return cudaSuccess;
}

}  // namespace topocoll::kernels
