// The seam between the two halves of the host emulation of a GPU node (tests only):
// libcudart_emu.so (cudart_emu.cpp) stands in for the CUDA runtime with host memory and
// streams that execute in call order, and libnccl_emu.so (nccl_emu.cpp) stands in for NCCL
// with processes that exchange bytes over Unix sockets. Together they let the interposer
// (libnccl-topocoll-emu.so: the production sources, CPU reductions in place of the CUDA
// kernels) run the very same multi-process check as the GPU machine does
// (tests/interposer/gpu_check.cpp) on a machine without a GPU.
//
// What it checks: the interposer's logic and every byte it moves or reduces. What it
// cannot: CUDA's own rules (capture legality, stream concurrency), device kernels, and
// NCCL's real transports. Those need the GPU run (perf/gpu/run_all.sh).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>

#define TOPOCOLL_EMU_API __attribute__((visibility("default")))

namespace topocoll::emu {

// Work "enqueued on a stream". Streams run in issue order on the calling thread, so
// `work` runs before enqueue() returns, unless `stream` is being captured
// (cudaStreamBeginCapture): then it is appended to the capture and runs at every
// cudaGraphLaunch of the instantiated graph, in capture order. The legacy and per-thread
// default streams (0, cudaStreamLegacy, cudaStreamPerThread) are one stream per thread.
TOPOCOLL_EMU_API void enqueue(cudaStream_t stream, std::function<void()> work);

// Whether `stream` is being captured now.
TOPOCOLL_EMU_API bool is_capturing(cudaStream_t stream);

// Device memory is host memory from cudaMalloc. Aborts (via fail) unless [p, p + bytes)
// lies inside one live allocation: an out-of-bounds or freed buffer is a test failure, not
// silent corruption. `what` names the caller in the message.
TOPOCOLL_EMU_API void check_device_range(const void* p, std::size_t bytes, const char* what);

// A failure inside work that runs at graph launch has no caller to return to: it prints
// `what` to stderr and aborts the process, so a test sees it.
[[noreturn]] TOPOCOLL_EMU_API void fail(const char* what);

}  // namespace topocoll::emu
