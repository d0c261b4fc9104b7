// Device scratch of one communicator: grown on demand, never shrunk, freed with the
// communicator (destroy/abort). A grown-out buffer is kept until then rather than freed,
// because work already enqueued, or a CUDA graph captured earlier, may still use it; the
// cost is at most the geometric series of the growth (under 2x the largest size).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace topocoll::plugin::interposer {

class DeviceScratch {
 public:
  explicit DeviceScratch(int device) : device_(device) {}
  ~DeviceScratch();
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` of device memory on the communicator's device (the caller has made it
  // current). Allocation is allowed while a stream is being captured (relaxed capture mode
  // for the one cudaMalloc, as CUDA graph-aware allocators do). Null on allocation failure.
  void* reserve(std::size_t bytes);
  std::size_t capacity() const { return capacity_; }

  // Orders a call on `stream` after the previous call's use of the scratch when that was
  // on another stream (skipped while capturing: use one stream per communicator in a graph).
  void order_after_previous(cudaStream_t stream);
  void mark_used(cudaStream_t stream);

 private:
  int device_;
  void* buffer_ = nullptr;
  std::size_t capacity_ = 0;
  std::vector<void*> retired_;
  cudaEvent_t last_use_ = nullptr;
  cudaStream_t last_stream_ = nullptr;
  bool has_last_ = false;
};

}  // namespace topocoll::plugin::interposer
