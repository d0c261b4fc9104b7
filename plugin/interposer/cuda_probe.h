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

// A call whose failure topocoll handles itself: its error is cleared from the last error.
inline cudaError_t quietly(cudaError_t e) {
  if (e != cudaSuccess) cudaGetLastError();
  return e;
}

}  // namespace topocoll::plugin::interposer
