#include "plugin/interposer/device_guard.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

namespace topocoll::plugin::interposer {
namespace {

// Whether the calling thread has a current CUDA context, asked of the driver the runtime
// has already loaded (no link dependency on libcuda, so CPU-only machines run the tests).
// With no driver loaded there is no context either.
bool thread_has_context() {
  using GetCurrent = int (*)(void**);  // CUresult cuCtxGetCurrent(CUcontext*)
  static GetCurrent get_current = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent")) : nullptr;
  }();
  if (!get_current) return false;
  void* ctx = nullptr;
  return get_current(&ctx) == 0 && ctx != nullptr;
}

}  // namespace

CurrentDeviceGuard::CurrentDeviceGuard() {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    cudaGetLastError();
    previous_ = -1;
  }
}

void CurrentDeviceGuard::use(int device) {
  if (device < 0) return;
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return;
  if (!changed_) had_context_ = thread_has_context();
  if (cudaSetDevice(device) == cudaSuccess) changed_ = true;
  else cudaGetLastError();
}

CurrentDeviceGuard::~CurrentDeviceGuard() {
  if (changed_ && had_context_ && previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace topocoll::plugin::interposer
