// Launch sizing from the device: how many blocks of a kernel can be resident at once.
#pragma once

#include <cuda_runtime_api.h>

namespace topocoll::kernels {

// SM count x resident blocks per SM for `kernel` at `block_threads` on the current device.
// Cached per (device, slot): slot identifies the kernel (0 <= slot < kOccupancySlots), so the
// attribute queries run once per kernel and device, not per launch.
inline constexpr int kOccupancySlots = 128;
cudaError_t max_resident_blocks(const void* kernel, int block_threads, int slot, int* blocks);

}  // namespace topocoll::kernels
