// Host backend: the engine's Backend on CPU memory. Transfers go through a HostTransport
// (threads in one process, or sockets between processes); reduce and finalize are the
// kernels' CPU references (kernels/reduce_cpu.h), so results are bitwise those of the CUDA
// kernels. Overlapped local ops (exec/pipeline.h) run on a worker thread
// (exec/local_op_worker.h) while the caller's thread moves the next round's bytes.
#pragma once

#include "exec/backend.h"
#include "exec/host_transport.h"
#include "exec/local_op_worker.h"

namespace topocoll::exec {

class HostBackend final : public Backend {
 public:
  // overlap = false: pipelined steps run uncut on the caller's thread (a machine with no
  // core to spare for the worker).
  explicit HostBackend(HostTransport& transport, bool overlap = true)
      : transport_(&transport), overlap_(overlap) {}

  HostTransport& transport() const { return *transport_; }

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

  bool overlaps_local_ops() const override { return overlap_; }
  void begin_overlapped_local_ops() override { deferring_ = overlap_; }
  void end_overlapped_local_ops() override { deferring_ = false; }
  void join_local_ops() override { worker_.join(); }

 private:
  HostTransport* transport_;
  bool overlap_;
  bool deferring_ = false;  // between begin/end_overlapped_local_ops: ops go to the worker
  int depth_ = 0;           // nested transfer batches (exec/backend.h)
  LocalOpWorker worker_;    // last: joined before the rest is destroyed
};

}  // namespace topocoll::exec
