// libcudart_emu.so: the CUDA runtime calls topocoll's interposer and its checks make, on
// host memory (see emu_runtime.h for what this emulation can and cannot show).
//
//   memory   cudaMalloc is host memory filled with 0xCD (device memory is never zeroed),
//            tracked so copies and kernels into freed or foreign memory abort the test;
//   streams  execute in issue order on the calling thread, so "asynchronous" work is done
//            when the call returns and every synchronisation is a no-op;
//   capture  cudaStreamBeginCapture makes the stream record its work instead of running it;
//            cudaGraphLaunch runs the recording, in order, on the launching thread;
//   events   record a host timestamp, so cudaEventElapsedTime measures host time.
#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "tests/emu/emu_runtime.h"

struct CUgraph_st {
  std::vector<std::function<void()>> work;
};
struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};
struct CUstream_st {
  CUgraph_st* capture = nullptr;  // non-null while capturing
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
};

namespace topocoll::emu {
namespace {

thread_local int current_device = 0;
thread_local cudaError_t last_error = cudaSuccess;
thread_local cudaStreamCaptureMode capture_mode = cudaStreamCaptureModeGlobal;

// The legacy and per-thread default streams are the same stream here: each thread's own.
CUstream_st* resolve(cudaStream_t stream) {
  thread_local CUstream_st default_stream;
  const auto handle = reinterpret_cast<std::uintptr_t>(stream);
  if (handle <= 2) return &default_stream;
  return stream;
}

cudaError_t fail_with(cudaError_t e) {
  last_error = e;
  return e;
}

struct Allocations {
  std::mutex mu;
  std::map<const char*, std::size_t> live;  // base -> bytes
};
Allocations& allocations() {
  static Allocations* a = new Allocations;  // outlives static destructors of callers
  return *a;
}

bool inside_allocation(const void* p, std::size_t bytes) {
  Allocations& a = allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  const char* c = static_cast<const char*>(p);
  auto it = a.live.upper_bound(c);
  if (it == a.live.begin()) return false;
  --it;
  return c >= it->first && bytes <= it->second && std::size_t(c - it->first) <= it->second - bytes;
}

}  // namespace

void enqueue(cudaStream_t stream, std::function<void()> work) {
  CUstream_st* s = resolve(stream);
  if (s->capture) s->capture->work.push_back(std::move(work));
  else work();
}

bool is_capturing(cudaStream_t stream) { return resolve(stream)->capture != nullptr; }

void fail(const char* what) {
  std::fprintf(stderr, "cudart_emu: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

void check_device_range(const void* p, std::size_t bytes, const char* what) {
  if (inside_allocation(p, bytes)) return;
  char msg[256];
  std::snprintf(msg, sizeof msg, "%s: [%p, +%zu) is not inside one live cudaMalloc allocation",
                what, p, bytes);
  fail(msg);
}

}  // namespace topocoll::emu

using topocoll::emu::check_device_range;
using topocoll::emu::enqueue;
using topocoll::emu::fail_with;
using topocoll::emu::resolve;

extern "C" {

// ---- errors and devices ---------------------------------------------------------------------

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidDevice: return "invalid device ordinal (emulated)";
    case cudaErrorIllegalState: return "operation not permitted when stream is capturing (emulated)";
    default: return "emulated CUDA error";
  }
}

cudaError_t cudaGetLastError(void) {
  const cudaError_t e = topocoll::emu::last_error;
  topocoll::emu::last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return topocoll::emu::last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return fail_with(cudaErrorInvalidValue);
  *count = 8;  // the ordinals a test may use; all of them are this host's memory
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= 8) return fail_with(cudaErrorInvalidDevice);
  topocoll::emu::current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return fail_with(cudaErrorInvalidValue);
  *device = topocoll::emu::current_device;
  return cudaSuccess;
}

// One bus per ordinal, as nvidia-smi would list eight GPUs of one host.
cudaError_t cudaDeviceGetPCIBusId(char* pci_bus_id, int len, int device) {
  if (!pci_bus_id || len < 13 || device < 0 || device >= 8) return fail_with(cudaErrorInvalidValue);
  std::snprintf(pci_bus_id, std::size_t(len), "0000:%02X:00.0", 0x18 + 0x10 * device);
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

// ---- memory ---------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t size) {
  if (!ptr) return fail_with(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (size == 0) return cudaSuccess;
  void* p = std::aligned_alloc(256, (size + 255) / 256 * 256);
  if (!p) return fail_with(cudaErrorMemoryAllocation);
  std::memset(p, 0xCD, size);
  auto& a = topocoll::emu::allocations();
  std::lock_guard<std::mutex> lock(a.mu);
  a.live[static_cast<const char*>(p)] = size;
  *ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  auto& a = topocoll::emu::allocations();
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(a.mu);
    auto it = a.live.find(static_cast<const char*>(ptr));
    if (it == a.live.end()) return fail_with(cudaErrorInvalidValue);
    bytes = it->second;
    a.live.erase(it);
  }
  std::memset(ptr, 0xDD, bytes);  // a use after free reads garbage even before reuse
  std::free(ptr);
  return cudaSuccess;
}

static void check_copy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return;
  if (kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyHostToDevice)
    check_device_range(dst, count, "cudaMemcpy destination");
  if (kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDeviceToHost)
    check_device_range(src, count, "cudaMemcpy source");
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  check_copy(dst, src, count, kind);
  if (count) std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  check_copy(dst, src, count, kind);
  if (count) enqueue(stream, [=] { std::memmove(dst, src, count); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, size_t count) {
  if (count) check_device_range(dst, count, "cudaMemset");
  if (count) std::memset(dst, value, count);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, size_t count, cudaStream_t stream) {
  if (count) check_device_range(dst, count, "cudaMemsetAsync");
  if (count) enqueue(stream, [=] { std::memset(dst, value, count); });
  return cudaSuccess;
}

// ---- streams --------------------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  if (!stream) return fail_with(cudaErrorInvalidValue);
  *stream = new CUstream_st;
  return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamCreateWithPriority(cudaStream_t* stream, unsigned int, int) {
  return cudaStreamCreate(stream);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (reinterpret_cast<std::uintptr_t>(stream) <= 2) return fail_with(cudaErrorInvalidValue);
  if (stream->capture) return fail_with(cudaErrorIllegalState);
  delete stream;
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  // Synchronising a capturing stream is illegal in CUDA, and it is a bug to do it here too.
  return resolve(stream)->capture ? fail_with(cudaErrorIllegalState) : cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t event, unsigned int) {
  return event ? cudaSuccess : fail_with(cudaErrorInvalidValue);
}

// ---- capture and graphs ---------------------------------------------------------------------

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode) {
  CUstream_st* s = resolve(stream);
  if (s->capture) return fail_with(cudaErrorIllegalState);
  s->capture = new CUgraph_st;
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  CUstream_st* s = resolve(stream);
  if (!graph || !s->capture) return fail_with(cudaErrorIllegalState);
  *graph = s->capture;
  s->capture = nullptr;
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!status) return fail_with(cudaErrorInvalidValue);
  *status = resolve(stream)->capture ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  if (!mode) return fail_with(cudaErrorInvalidValue);
  std::swap(*mode, topocoll::emu::capture_mode);
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  if (!exec || !graph) return fail_with(cudaErrorInvalidValue);
  *exec = new CUgraphExec_st{graph->work};
  return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!exec) return fail_with(cudaErrorInvalidValue);
  for (const auto& w : exec->work) enqueue(stream, w);
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

// ---- events ---------------------------------------------------------------------------------

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  *event = new CUevent_st;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int) {
  return cudaEventCreate(event);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return fail_with(cudaErrorInvalidValue);
  enqueue(stream, [event] { event->when = std::chrono::steady_clock::now(); });
  return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : fail_with(cudaErrorInvalidValue);
}

cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event ? cudaSuccess : fail_with(cudaErrorInvalidValue);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return fail_with(cudaErrorInvalidValue);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}

}  // extern "C"
