// NCCL/CUDA backend: the engine's Backend (exec/backend.h) on device memory and the user's
// stream. A step is
//     pncclGroupStart; the step's pncclSend/pncclRecv; pncclGroupEnd;
//     then the CUDA reduce/copy/finalize kernels for what arrived,
// all enqueued on one stream, so a whole collective is stream-ordered (the kernels see the
// received bytes because NCCL's p2p completes in stream order) and capturable in a CUDA
// graph: no host synchronisation and no allocation here. Nested batches map onto NCCL's own
// group nesting, so several executions (run_interleaved) post one step together in one
// NCCL group, even across communicators on different devices driven by one thread.
//
// It calls NCCL's strong pnccl* symbols directly so that, inside the interposer, its
// transfers never come back through the interposed nccl* entry points.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>

#include "exec/backend.h"

namespace topocoll::exec {

// A failed NCCL or CUDA call, with the ncclResult_t the interposed entry point must return
// (ncclRemoteError, ncclSystemError, ... from NCCL; ncclUnhandledCudaError for CUDA), so a
// caller such as PyTorch sees NCCL's own error class, not a generic internal error.
class NcclCallError : public BackendError {
 public:
  NcclCallError(const std::string& what, ncclResult_t result)
      : BackendError(what), result_(result) {}
  ncclResult_t result() const { return result_; }

 private:
  ncclResult_t result_;
};

class NcclBackend final : public Backend {
 public:
  // `device` is the communicator's CUDA device; kernels are launched with it current.
  NcclBackend(ncclComm_t comm, cudaStream_t stream, int device)
      : comm_(comm), stream_(stream), device_(device) {}

  ncclComm_t comm() const { return comm_; }
  cudaStream_t stream() const { return stream_; }
  // After a failure mid-step: closes the NCCL groups this backend opened and did not close,
  // so the calling thread is not left inside an NCCL group. Never throws.
  void close_open_batches() noexcept;

  void begin_transfers() override;
  void post_send(int peer, const void* src, std::size_t bytes) override;
  void post_recv(int peer, void* dst, std::size_t bytes) override;
  void end_transfers() override;

  void reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs, int nsrc,
              int64_t count) override;
  void copy(void* dst, const void* src, std::size_t bytes) override;
  void finalize(const CollectiveBinding& binding, void* dst, int64_t count) override;
  void avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                  int64_t count) override;

 private:
  void make_device_current();

  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  int open_batches_ = 0;
};

}  // namespace topocoll::exec
