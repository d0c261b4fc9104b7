// Collectives issued inside a user's ncclGroupStart/End.
//
// A schedule step needs its receives complete before its reduce kernel, so a topocoll
// collective cannot run inside an open NCCL group (its step groups would merge into the
// user's group and the kernels would run before the data arrived). The interposer
// therefore queues served collectives while the thread's group depth is > 0 and runs them
// when the outermost ncclGroupEnd has closed NCCL's group: step k of every queued
// collective is posted in one NCCL group (exec::run_interleaved), then their kernels run,
// then step k+1. That is what lets one thread drive several communicators (nccl-tests -g,
// ncclCommInitAll) without deadlock: every GPU's step-k transfers are posted together.
//
// Backend-agnostic: the interposer queues NcclBackend executions, the tests host ones.
#pragma once

#include <memory>
#include <vector>

#include "exec/backend.h"
#include "exec/engine.h"
#include "sched/schedule.h"

namespace topocoll::plugin::interposer {

struct QueuedCollective {
  std::shared_ptr<const sched::Schedule> schedule;
  int rank = 0;
  kernels::DataType dtype = kernels::DataType::Float32;
  kernels::ReduceOp op = kernels::ReduceOp::Sum;
  exec::Buffers buffers;
  std::shared_ptr<exec::Backend> backend;
};

class CollectiveQueue {
 public:
  void push(QueuedCollective c) { queued_.push_back(std::move(c)); }
  bool empty() const { return queued_.empty(); }
  std::size_t size() const { return queued_.size(); }
  std::vector<QueuedCollective>& entries() { return queued_; }

  // Runs every queued collective to completion, step by step across all of them, in
  // queue order within a step; the queue is empty afterwards, also when one fails (the
  // exception propagates: a failed step leaves the others' later steps unposted).
  void run_all();

 private:
  std::vector<QueuedCollective> queued_;
};

// The calling thread's ncclGroupStart nesting, as NCCL counts it (NCCL's group state is
// per thread too).
class GroupDepth {
 public:
  void enter() { ++depth_; }
  // False when there was no open group (the caller lets NCCL report the misuse).
  bool leave() {
    if (depth_ == 0) return false;
    --depth_;
    return true;
  }
  int depth() const { return depth_; }
  bool inside() const { return depth_ > 0; }

 private:
  int depth_ = 0;
};

}  // namespace topocoll::plugin::interposer
