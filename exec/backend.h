// Backend: what the engine (exec/engine.h) needs from a machine to run schedule steps.
//
//   transport  a step's sends and receives are posted as one batch between
//              begin_transfers() and end_transfers(); after end_transfers() every transfer
//              posted since the matching begin_transfers() is complete (host backend) or
//              ordered before anything enqueued later (NCCL backend: pncclGroupStart ...
//              pncclSend/pncclRecv ... pncclGroupEnd, then kernels on the same stream).
//   reducer    reduce / copy / finalize / avg_premul on resolved pointers, in the order they
//              are called.
//
// Batches nest like NCCL groups: begin_transfers() may be called again before
// end_transfers(); the transfers are complete after the outermost end. That is how several
// collectives advance one step together (exec/engine.h, run_interleaved).
//
// Buffers are raw pointers the engine resolved from (Input|Output|Scratch, element offset);
// the engine never dereferences them, so they may be host or device memory. The engine does
// not allocate either: the caller provides scratch of scratch_bytes() per execution.
//
// Errors are reported by throwing BackendError (or any std::exception); the engine lets it
// propagate and marks the execution failed. C ABI boundaries (plugin/) catch it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/datatype.h"
#include "sched/schedule.h"

namespace topocoll::exec {

class BackendError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What a collective call binds: element type, reduction and the communicator it runs on.
// Reduce/finalize receive it so one backend can serve interleaved collectives of
// different types and ops.
struct CollectiveBinding {
  kernels::DataType dtype = kernels::DataType::Float32;
  kernels::ReduceOp op = kernels::ReduceOp::Sum;
  int rank = 0;
  int nranks = 1;
  std::size_t elem_bytes() const { return kernels::datatype_size(dtype); }
};

class Backend {
 public:
  virtual ~Backend() = default;

  // --- transport -----------------------------------------------------------------------
  virtual void begin_transfers() = 0;
  // `bytes` > 0 (the engine skips empty transfers on both sides; a schedule's matching
  // send and receive always have the same count). Messages between one (src, dst) pair
  // match in posting order.
  virtual void post_send(int peer, const void* src, std::size_t bytes) = 0;
  virtual void post_recv(int peer, void* dst, std::size_t bytes) = 0;
  virtual void end_transfers() = 0;

  // --- local ops (run after the step's transfers are complete) ------------------------
  // dst[i] = srcs[0][i] op srcs[1][i] op ... left to right; dst may equal any one source.
  virtual void reduce(const CollectiveBinding& binding, void* dst, const void* const* srcs,
                      int nsrc, int64_t count) = 0;
  // Non-overlapping ranges (dst == src is allowed and is a no-op).
  virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
  // The op's final step on the fully reduced value (avg: divide by nranks; others: none).
  virtual void finalize(const CollectiveBinding& binding, void* dst, int64_t count) = 0;
  // Avg on a floating type, before anything else of the collective: dst = src times NCCL's
  // 1/nranks scalar (kernels/avg_scalar.h); dst may equal src.
  virtual void avg_premul(const CollectiveBinding& binding, void* dst, const void* src,
                          int64_t count) = 0;

  // --- overlap (engine pipelining, exec/pipeline.h) ----------------------------------
  // Whether local ops can run while later transfers move. Without it the engine never runs
  // a step in rounds.
  virtual bool overlaps_local_ops() const { return false; }
  // Local ops called between begin_overlapped_local_ops() and end_overlapped_local_ops()
  // see every transfer batch completed before the begin, in the order called, and may still
  // be running while later batches move (the engine posts nothing later that touches their
  // bytes); join_local_ops() orders everything after them (transfers, local ops, the
  // caller's next use of the buffers). Errors of overlapped ops may surface at the join.
  virtual void begin_overlapped_local_ops() {}
  virtual void end_overlapped_local_ops() {}
  virtual void join_local_ops() {}

  // --- step boundaries (timing) ------------------------------------------------------
  // Boundary k comes before anything of step k (its avg pre-multiply, its transfers);
  // boundary num_steps after the last step's local ops, overlapped ones joined. Step k is
  // what lies between boundaries k and k + 1. The NCCL backend times steps there
  // (exec/step_timeline.h); nothing by default.
  virtual void step_boundary(int /*boundary*/) {}
};

}  // namespace topocoll::exec
