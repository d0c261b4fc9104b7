// A net plugin that forwards every call to another (the library TOPOCOLL_SPY_NET_INNER
// names) and writes one line per call to TOPOCOLL_SPY_NET_LOG: the entry point, the thread
// that made it and, for calls that take one, the context. The emulation's tests read it to
// check that its proxy calls a plugin from the threads NCCL 2.28 calls it from, and can make
// test() fail with a chosen code.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "plugin/nccl_api/net_v11.h"

namespace {

const ncclNet_v11_t* inner() {
  static const ncclNet_v11_t* const net = [] () -> const ncclNet_v11_t* {
    const char* path = std::getenv("TOPOCOLL_SPY_NET_INNER");
    void* lib = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : nullptr;
    return lib ? static_cast<const ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11")) : nullptr;
  }();
  return net;
}

void note(const char* call, const void* ctx = nullptr) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  static std::FILE* const log = [] {
    const char* path = std::getenv("TOPOCOLL_SPY_NET_LOG");
    return path ? std::fopen(path, "w") : nullptr;
  }();
  if (!log) return;
  std::fprintf(log, "%s %ld %p\n", call, long(syscall(SYS_gettid)), ctx);
  std::fflush(log);
}

ncclResult_t init(void** ctx, uint64_t id, ncclNetCommConfig_v11_t* config, ncclDebugLogger_t logger,
                  ncclProfilerCallback_t profiler) {
  if (!inner()) return ncclSystemError;
  const ncclResult_t r = inner()->init(ctx, id, config, logger, profiler);
  note("init", ctx ? *ctx : nullptr);
  return r;
}
ncclResult_t devices(int* n) { note("devices"); return inner()->devices(n); }
ncclResult_t get_properties(int dev, ncclNetProperties_v11_t* props) {
  note("getProperties");
  return inner()->getProperties(dev, props);
}
ncclResult_t listen(void* ctx, int dev, void* handle, void** comm) {
  note("listen", ctx);
  return inner()->listen(ctx, dev, handle, comm);
}
ncclResult_t connect(void* ctx, int dev, void* handle, void** comm, ncclNetDeviceHandle_v11_t** dev_comm) {
  note("connect", ctx);
  return inner()->connect(ctx, dev, handle, comm, dev_comm);
}
ncclResult_t accept(void* listen_comm, void** comm, ncclNetDeviceHandle_v11_t** dev_comm) {
  note("accept");
  return inner()->accept(listen_comm, comm, dev_comm);
}
ncclResult_t reg_mr(void* comm, void* data, size_t size, int type, void** mhandle) {
  note("regMr");
  return inner()->regMr(comm, data, size, type, mhandle);
}
ncclResult_t dereg_mr(void* comm, void* mhandle) { note("deregMr"); return inner()->deregMr(comm, mhandle); }
ncclResult_t isend(void* comm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request) {
  note("isend");
  return inner()->isend(comm, data, size, tag, mhandle, phandle, request);
}
ncclResult_t irecv(void* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                   void** request) {
  note("irecv");
  return inner()->irecv(comm, n, data, sizes, tags, mhandles, phandles, request);
}
ncclResult_t iflush(void* comm, int n, void** data, int* sizes, void** mhandles, void** request) {
  note("iflush");
  return inner()->iflush(comm, n, data, sizes, mhandles, request);
}
// TOPOCOLL_SPY_NET_TEST_RESULT=<ncclResult_t>: every test() returns that code, as a plugin
// does whose peer died, so a test can see which code NCCL's caller gets back.
ncclResult_t test(void* request, int* done, int* sizes) {
  note("test");
  static const int injected = [] {
    const char* v = std::getenv("TOPOCOLL_SPY_NET_TEST_RESULT");
    return v ? std::atoi(v) : 0;
  }();
  if (injected != 0) return ncclResult_t(injected);
  return inner()->test(request, done, sizes);
}
ncclResult_t close_send(void* comm) { note("closeSend"); return inner()->closeSend(comm); }
ncclResult_t close_recv(void* comm) { note("closeRecv"); return inner()->closeRecv(comm); }
ncclResult_t close_listen(void* comm) { note("closeListen"); return inner()->closeListen(comm); }
ncclResult_t finalize(void* ctx) { note("finalize", ctx); return inner()->finalize(ctx); }
ncclResult_t set_net_attr(void* ctx, ncclNetAttr_v11_t* attr) {
  note("setNetAttr", ctx);
  return inner()->setNetAttr ? inner()->setNetAttr(ctx, attr) : ncclSuccess;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) ncclNet_v11_t ncclNetPlugin_v11 = {
    "topocoll-spy", init,     devices,    get_properties, listen,       connect,  accept,  reg_mr,
    nullptr /* regMrDmaBuf, as topocoll's */,  dereg_mr, isend,      irecv,          iflush,       test,     close_send, close_recv,
    close_listen,   nullptr /* getDeviceMr */, nullptr /* irecvConsumed */, nullptr /* makeVDevice */,
    finalize,       set_net_attr,
};
}  // extern "C"
