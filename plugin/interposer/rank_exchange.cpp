#include "plugin/interposer/rank_exchange.h"

#include <cuda_runtime.h>

#include <cstring>

#include "plugin/interposer/device_guard.h"

namespace topocoll::plugin::interposer {
namespace {

struct DeviceSlot {
  void* buffer = nullptr;
  cudaStream_t stream = nullptr;
  bool joined = false;
};

}  // namespace

void exchange_identities(std::span<IdentityExchange> batch) {
  if (batch.empty()) return;
  CurrentDeviceGuard device_guard;
  // Relaxed for this thread: a graph being captured in global mode by another thread would
  // otherwise make the allocations below fail (and invalidate that capture).
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  std::vector<DeviceSlot> slots(batch.size());
  const std::size_t rec = sizeof(RankIdentity);

  for (std::size_t i = 0; i < batch.size(); ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(x.device);
    int current = -1;
    cudaError_t e = cudaGetDevice(&current);
    if (e == cudaSuccess && current != x.device) e = cudaErrorInvalidDevice;
    if (e == cudaSuccess) e = cudaMalloc(&s.buffer, rec * std::size_t(x.nranks));
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking);
    // On the exchange's own stream: a cudaMemcpy from pageable memory runs on the legacy
    // stream and may return before its DMA lands, with no order against the non-blocking
    // stream the allgather uses, so the allgather could send stale bytes. `x.mine` lives
    // until the stream is synchronised below.
    if (e == cudaSuccess)
      e = cudaMemcpyAsync(static_cast<char*>(s.buffer) + rec * std::size_t(x.rank), &x.mine, rec,
                          cudaMemcpyHostToDevice, s.stream);
    if (e != cudaSuccess) {
      x.error = std::string("CUDA error preparing the topocoll identity exchange: ") +
                cudaGetErrorString(e);
      cudaGetLastError();
    }
  }

  ncclResult_t r = pncclGroupStart();
  for (std::size_t i = 0; i < batch.size() && r == ncclSuccess; ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    // Cannot join without device memory. The peers then wait in NCCL (which has no
    // timeout): only possible when CUDA fails on a device that holds a live communicator.
    if (!s.buffer || !s.stream) continue;
    char* base = static_cast<char*>(s.buffer);
    const ncclResult_t ar = pncclAllGather(base + rec * std::size_t(x.rank), base, rec, ncclUint8,
                                           x.comm, s.stream);
    if (ar != ncclSuccess) x.error = std::string("ncclAllGather: ") + pncclGetErrorString(ar);
    else s.joined = true;
  }
  const ncclResult_t er = pncclGroupEnd();

  for (std::size_t i = 0; i < batch.size(); ++i) {
    IdentityExchange& x = batch[i];
    DeviceSlot& s = slots[i];
    device_guard.use(x.device);
    if (s.joined && er == ncclSuccess && x.error.empty()) {
      x.all.resize(std::size_t(x.nranks));
      cudaError_t e = cudaStreamSynchronize(s.stream);
      // Same stream again, then wait: never behind the user's work on the legacy stream.
      if (e == cudaSuccess)
        e = cudaMemcpyAsync(x.all.data(), s.buffer, rec * x.all.size(), cudaMemcpyDeviceToHost,
                            s.stream);
      if (e == cudaSuccess) e = cudaStreamSynchronize(s.stream);
      if (e != cudaSuccess) {
        x.error = std::string("CUDA error in the identity exchange: ") + cudaGetErrorString(e);
        x.all.clear();
        cudaGetLastError();
      }
    } else if (x.error.empty()) {
      x.error = std::string("ncclGroupEnd: ") + pncclGetErrorString(er);
    }
    if (s.stream) cudaStreamDestroy(s.stream);
    if (s.buffer) cudaFree(s.buffer);
  }
  cudaThreadExchangeStreamCaptureMode(&mode);
}

}  // namespace topocoll::plugin::interposer
