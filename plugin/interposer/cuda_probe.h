// CUDA queries the interposer makes on the application's behalf. A failed query sets the
// runtime's per-thread "last error" as any failed call does (cudaGetLastError), so each
// probe clears what it leaves behind: the application's next cudaGetLastError must report
// its own errors, not topocoll's. Sticky errors (a dead context) cannot be cleared and are
// not ours to hide.
#pragma once

#include <cuda_runtime.h>

namespace topocoll::plugin::interposer {

// Whether `stream` is being captured into a CUDA graph. cudaStreamIsCapturing fails
// (cudaErrorStreamCaptureImplicit) for the legacy stream while another thread captures in
// global mode; that is "no capture on this stream" for topocoll's purposes.
inline bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status != cudaStreamCaptureStatusNone;
}

// What NCCL compares to tell whether a group's streams are captured by the same graph
// (2.28 strongstream.cc ncclCudaGetCapturingGraph, the capture's id): the id of the capture
// `stream` takes part in, unique in the process, or kNotCapturing (a failed query too, as in
// stream_capturing).
inline constexpr unsigned long long kNotCapturing = ~0ull;
inline unsigned long long stream_capture_id(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess) {
    cudaGetLastError();
    return kNotCapturing;
  }
  return status == cudaStreamCaptureStatusActive ? id : kNotCapturing;
}

// What NCCL_CHECK_POINTERS=1 makes NCCL check of a buffer (2.28 argcheck.cc CudaPtrCheck): the
// runtime knows it as memory the device can reach, and device memory is of `device`.
inline bool nccl_accepts_pointer(const void* pointer, int device) {
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, pointer) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return attr.devicePointer != nullptr && !(attr.type == cudaMemoryTypeDevice && attr.device != device);
}

// A call whose failure topocoll handles itself: its error is cleared from the last error.
inline cudaError_t quietly(cudaError_t e) {
  if (e != cudaSuccess) cudaGetLastError();
  return e;
}

}  // namespace topocoll::plugin::interposer
