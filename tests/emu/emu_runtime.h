// The seam between the two halves of the host emulation of a GPU node (tests only):
// libcudart_emu.so (cudart_emu.cpp) stands in for the CUDA runtime with host memory and
// streams that execute in call order, and libnccl_emu.so (nccl_emu.cpp) stands in for NCCL
// with processes that exchange bytes over Unix sockets. Together they let the interposer
// (libnccl-topocoll-emu.so: the production sources, CPU reductions in place of the CUDA
// kernels) run the very same multi-process check as the GPU machine does
// (tests/interposer/gpu_check.cpp) on a machine without a GPU.
//
// What it checks: the interposer's logic and every byte it moves or reduces, and (with
// vector clocks, below) that no two streams touch the same device bytes without an event or
// a synchronisation ordering them; and, of capture legality, CUDA's rule on "potentially
// unsafe" calls for event queries and waits (cudart_emu.cpp, unsafe_call_prohibited). What it
// cannot: the other capture rules, device kernels, and NCCL's real transports. Those need the
// GPU run (perf/gpu/run_all.sh).
//
// Stream-ordering races: streams run synchronously here, so a missing event never corrupts
// a result; instead every stream (and the host) carries a vector clock that follows CUDA's
// ordering rules (stream order, cudaEventRecord/cudaStreamWaitEvent, the synchronisations),
// and every piece of device work declares the device bytes it reads and writes (access()).
// Two accesses to overlapping bytes of one cudaMalloc allocation, at least one a write, on
// different streams, neither ordered before the other, abort the process with both named.
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

// Declares that the work now running reads (or writes) [p, p + bytes) of device memory.
// Call it from inside the work passed to enqueue(), so that it is stamped when the work runs
// (at each graph launch, on the launching stream, for captured work); outside of any
// enqueued work it is stamped on `stream`'s current clock. Bytes outside every cudaMalloc
// allocation are not tracked. A race with an earlier access aborts the process (fail).
// `what` names the work in the report.
TOPOCOLL_EMU_API void access(const void* p, std::size_t bytes, bool write, cudaStream_t stream,
                             const char* what);

// Work that NCCL runs as one launch joined to several streams (a group whose operations are
// on different streams): every stream's later work is ordered after the prior work of all
// of them (NCCL makes the launch wait for every stream, and every stream wait for the
// launch). Called before and after such work.
TOPOCOLL_EMU_API void join_streams(const cudaStream_t* streams, std::size_t n);

// Whether `stream` is being captured now.
TOPOCOLL_EMU_API bool is_capturing(cudaStream_t stream);
// How many device-wide synchronisations the host has asked for so far (cudaFree,
// cudaDeviceSynchronize): code that must not wait for the whole device checks it is unchanged.
TOPOCOLL_EMU_API long device_synchronization_count();
// Bytes of device memory allocated and not yet freed (a stream-ordered free counts once
// its stream has reached it).
TOPOCOLL_EMU_API std::size_t live_device_bytes();
// Counters of named events ("cudaMemcpyAsync", "copy_ranges launch"), process-wide, so
// tests can tell how work was issued.
TOPOCOLL_EMU_API void count_event(const char* what);
TOPOCOLL_EMU_API long event_count(const char* what);

// Makes the next call of `function` fail with `error` (once), so tests reach the paths a
// real device takes only when CUDA fails. Functions that honour it: cudaStreamWaitEvent,
// cudaEventCreateWithFlags, cudaEventRecord and cudaEventQuery (cudaErrorNotReady there:
// the event's work is still running).
TOPOCOLL_EMU_API void fail_next_call(const char* function, cudaError_t error);
// The failure injected for `function`'s next call (taken: once), or cudaSuccess; for the
// emulated kernels (kernels_emu.cpp: "reduce_cuda").
TOPOCOLL_EMU_API cudaError_t take_injected_failure(const char* function);

// Device memory is host memory from cudaMalloc. Aborts (via fail) unless [p, p + bytes)
// lies inside one live allocation: an out-of-bounds or freed buffer is a test failure, not
// silent corruption. `what` names the caller in the message.
TOPOCOLL_EMU_API void check_device_range(const void* p, std::size_t bytes, const char* what);

// A failure inside work that runs at graph launch has no caller to return to: it prints
// `what` to stderr and aborts the process, so a test sees it.
[[noreturn]] TOPOCOLL_EMU_API void fail(const char* what);

}  // namespace topocoll::emu
