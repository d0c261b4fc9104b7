#include "exec/nccl_backend.h"

#include <cuda_runtime.h>

#include <string>

#include "kernels/reduce_cuda.h"

namespace topocoll::exec {
namespace {

void check_nccl(ncclResult_t r, const char* what, int peer = -1) {
  if (r == ncclSuccess) return;
  std::string msg = std::string("NCCL backend: ") + what;
  if (peer >= 0) msg += " (peer " + std::to_string(peer) + ")";
  msg += " failed: " + std::string(pncclGetErrorString(r));
  throw NcclCallError(msg, r);
}

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  throw NcclCallError(std::string("NCCL backend: ") + what + " failed: " + cudaGetErrorString(e),
                      ncclUnhandledCudaError);
}

}  // namespace

std::unique_ptr<OverlapLane> OverlapLane::create(int device) {
  int previous = -1;
  if (cudaGetDevice(&previous) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  if (previous != device && cudaSetDevice(device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  std::unique_ptr<OverlapLane> lane(new OverlapLane);
  const bool ok =
      cudaStreamCreateWithFlags(&lane->stream_, cudaStreamNonBlocking) == cudaSuccess &&
      cudaEventCreateWithFlags(&lane->transfers_done_, cudaEventDisableTiming) == cudaSuccess &&
      cudaEventCreateWithFlags(&lane->local_done_, cudaEventDisableTiming) == cudaSuccess;
  if (!ok) {
    cudaGetLastError();  // not the application's error to find later
    lane.reset();
  }
  if (previous != device) cudaSetDevice(previous);
  return lane;
}

OverlapLane::~OverlapLane() {
  if (local_done_) cudaEventDestroy(local_done_);
  if (transfers_done_) cudaEventDestroy(transfers_done_);
  if (stream_) cudaStreamDestroy(stream_);
}

void NcclBackend::make_device_current() {
  int current = -1;
  check_cuda(cudaGetDevice(&current), "cudaGetDevice");
  if (current != device_) check_cuda(cudaSetDevice(device_), "cudaSetDevice");
}

void NcclBackend::begin_transfers() {
  check_nccl(pncclGroupStart(), "ncclGroupStart");
  ++open_batches_;
}

// Bytes travel as ncclUint8: the receive is posted with exactly the send's size (the
// schedules guarantee it), so the element type does not matter on the wire.
void NcclBackend::post_send(int peer, const void* src, std::size_t bytes) {
  check_nccl(pncclSend(src, bytes, ncclUint8, peer, comm_, stream_), "ncclSend", peer);
}

void NcclBackend::post_recv(int peer, void* dst, std::size_t bytes) {
  check_nccl(pncclRecv(dst, bytes, ncclUint8, peer, comm_, stream_), "ncclRecv", peer);
}

void NcclBackend::end_transfers() {
  if (open_batches_ == 0) throw BackendError("NCCL backend: end_transfers without begin_transfers");
  --open_batches_;
  check_nccl(pncclGroupEnd(), "ncclGroupEnd");
}

void NcclBackend::close_open_batches() noexcept {
  for (; open_batches_ > 0; --open_batches_) pncclGroupEnd();
}

void NcclBackend::reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs,
                         int nsrc, int64_t count) {
  make_device_current();
  check_cuda(kernels::reduce_cuda(binding.dtype, binding.op, dst, srcs, nsrc,
                                  std::size_t(count), work_stream_),
             "reduce kernel launch");
}

void NcclBackend::copy(void* dst, const void* src, std::size_t bytes) {
  if (dst == src || bytes == 0) return;
  make_device_current();
  // Default: the kind follows the pointers (unified addressing), as the kernels' loads do; a
  // user buffer in mapped host or managed memory is then no undefined copy.
  check_cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, work_stream_), "cudaMemcpyAsync");
}

void NcclBackend::finalize(const CollectiveBinding& binding, void* dst, int64_t count) {
  make_device_current();
  check_cuda(kernels::finalize_cuda(binding.dtype, binding.op, dst, std::size_t(count),
                                    binding.nranks, work_stream_),
             "finalize kernel launch");
}

void NcclBackend::avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                             int64_t count) {
  make_device_current();
  check_cuda(kernels::avg_premul_cuda(binding.dtype, dst, src, std::size_t(count),
                                      binding.nranks, stream_),
             "avg pre-multiply kernel launch");
}

// The lane waits for everything enqueued on the user's stream so far: the round's group.
void NcclBackend::begin_overlapped_local_ops() {
  if (!lane_) return;
  make_device_current();
  check_cuda(cudaEventRecord(lane_->transfers_done(), stream_), "cudaEventRecord (round done)");
  check_cuda(cudaStreamWaitEvent(lane_->stream(), lane_->transfers_done(), 0),
             "cudaStreamWaitEvent (lane after round)");
  work_stream_ = lane_->stream();
  lane_pending_ = true;
}

void NcclBackend::end_overlapped_local_ops() { work_stream_ = stream_; }

void NcclBackend::join_local_ops() {
  work_stream_ = stream_;
  if (!lane_ || !lane_pending_) return;
  lane_pending_ = false;
  make_device_current();
  check_cuda(cudaEventRecord(lane_->local_done(), lane_->stream()), "cudaEventRecord (lane done)");
  check_cuda(cudaStreamWaitEvent(stream_, lane_->local_done(), 0),
             "cudaStreamWaitEvent (stream after lane)");
}

}  // namespace topocoll::exec
