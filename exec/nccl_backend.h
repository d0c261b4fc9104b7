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
// Pipelined steps (exec/pipeline.h): with an OverlapLane the local ops of round j run on the
// lane's stream, ordered after round j's group by an event, while round j + 1's group moves
// on the user's stream; the step's join makes the user's stream wait for the lane. Captured
// into a CUDA graph this is the usual fork/join of two streams.
//
// It calls NCCL's strong pnccl* symbols directly so that, inside the interposer, its
// transfers never come back through the interposed nccl* entry points.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>

#include "exec/backend.h"
#include "exec/step_timeline.h"

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

// A second stream and two events one communicator lends its pipelined steps. Made once per
// communicator; destroying them never waits for the device (CUDA releases them when their
// work is done).
class OverlapLane {
 public:
  // On `device` (the current device is restored). Null, with CUDA's error cleared, when
  // CUDA cannot make them: the steps then run without overlap.
  static std::unique_ptr<OverlapLane> create(int device);
  ~OverlapLane();
  OverlapLane(const OverlapLane&) = delete;
  OverlapLane& operator=(const OverlapLane&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudaEvent_t transfers_done() const { return transfers_done_; }
  cudaEvent_t local_done() const { return local_done_; }

 private:
  OverlapLane() = default;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t transfers_done_ = nullptr, local_done_ = nullptr;
};

class NcclBackend final : public Backend {
 public:
  // `device` is the communicator's CUDA device; kernels are launched with it current.
  // `lane` (may be null: no overlap) must outlive the backend.
  NcclBackend(ncclComm_t comm, cudaStream_t stream, int device, OverlapLane* lane = nullptr)
      : comm_(comm), stream_(stream), device_(device), lane_(lane), work_stream_(stream) {}

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

  // Marks every step boundary of the collective it runs in `recording` (null: untimed),
  // on the user's stream (exec/step_timeline.h).
  void time_steps(StepTimeline::Recording* recording) { steps_ = recording; }
  // The event goes to the communicator's device (a batch may span devices; stream 0 is
  // each device's own).
  void step_boundary(int boundary) override {
    if (!steps_) return;
    make_device_current();
    steps_->mark(boundary, stream_);
  }

  bool overlaps_local_ops() const override { return lane_ != nullptr; }
  void begin_overlapped_local_ops() override;
  void end_overlapped_local_ops() override;
  void join_local_ops() override;

 private:
  void make_device_current();

  ncclComm_t comm_;
  cudaStream_t stream_;
  int device_;
  OverlapLane* lane_;
  StepTimeline::Recording* steps_ = nullptr;
  cudaStream_t work_stream_;  // where local ops go: stream_, or the lane's while overlapped
  bool lane_pending_ = false;  // overlapped work not yet joined into stream_
  int open_batches_ = 0;
};

}  // namespace topocoll::exec
