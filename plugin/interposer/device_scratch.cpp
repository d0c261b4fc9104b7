#include "plugin/interposer/device_scratch.h"

namespace topocoll::plugin::interposer {
namespace {

bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) return false;
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

DeviceScratch::~DeviceScratch() {
  int previous = -1;
  cudaGetDevice(&previous);
  if (device_ >= 0) cudaSetDevice(device_);
  // cudaFree waits for work still using the memory (implicit device synchronisation).
  if (buffer_) cudaFree(buffer_);
  for (void* p : retired_) cudaFree(p);
  if (last_use_) cudaEventDestroy(last_use_);
  if (previous >= 0) cudaSetDevice(previous);
}

void* DeviceScratch::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return buffer_;
  std::size_t grown = capacity_ ? capacity_ : std::size_t(1) << 20;
  while (grown < bytes) grown *= 2;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  void* fresh = nullptr;
  const cudaError_t err = cudaMalloc(&fresh, grown);
  cudaThreadExchangeStreamCaptureMode(&mode);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so the user's next call is unaffected
    return nullptr;
  }
  if (buffer_) retired_.push_back(buffer_);
  buffer_ = fresh;
  capacity_ = grown;
  return buffer_;
}

void DeviceScratch::order_after_previous(cudaStream_t stream) {
  if (!has_last_ || last_stream_ == stream || capturing(stream) || capturing(last_stream_)) return;
  cudaStreamWaitEvent(stream, last_use_, 0);
}

void DeviceScratch::mark_used(cudaStream_t stream) {
  if (capturing(stream)) {
    has_last_ = false;
    return;
  }
  if (!last_use_ && cudaEventCreateWithFlags(&last_use_, cudaEventDisableTiming) != cudaSuccess) {
    last_use_ = nullptr;
    return;
  }
  cudaEventRecord(last_use_, stream);
  last_stream_ = stream;
  has_last_ = true;
}

}  // namespace topocoll::plugin::interposer
