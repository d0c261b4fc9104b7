#include "tests/emu/nccl_emu_group.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/emu/emu_runtime.h"
#include "tests/emu/nccl_emu_failure.h"

namespace topocoll::emu {
namespace {

constexpr unsigned long long kNotCapturing = ~0ull;

// The capture `stream` takes part in (NCCL compares captures by id: strongstream.cc
// ncclCudaGetCapturingGraph).
unsigned long long capture_of(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &id) != cudaSuccess)
    throw Failure(ncclUnhandledCudaError, "cudaStreamGetCaptureInfo failed");
  return status == cudaStreamCaptureStatusActive ? id : kNotCapturing;
}

struct QueuedOp {
  std::shared_ptr<Exchange> op;
  std::optional<cudaStream_t> stream;
  unsigned long long capture = kNotCapturing;  // of `stream` when the op was enqueued
};

struct ThreadGroup {
  int depth = 0;
  std::vector<QueuedOp> queue;
  ncclResult_t error = ncclSuccess;  // NCCL's ncclGroupError
};
thread_local ThreadGroup group;

// Sends first, for every op, then receives: no op waits on a message that a later op of
// the same group would send.
void run(const std::vector<QueuedOp>& ops) {
  for (const QueuedOp& q : ops)
    if (q.stream) q.op->declare_accesses(*q.stream);
  try {
    for (const QueuedOp& q : ops) q.op->post();
    for (const QueuedOp& q : ops) q.op->complete();
  } catch (const Failure&) {
    throw;
  } catch (const std::exception& e) {
    throw Failure(ncclInternalError, e.what());
  }
}

ncclResult_t launch(std::vector<QueuedOp> ops) {
  if (ops.empty()) return ncclSuccess;
  std::set<cudaStream_t> streams, capturing;
  bool streamless = false;
  for (const QueuedOp& q : ops) {
    if (!q.stream) {
      streamless = true;
      continue;
    }
    streams.insert(*q.stream);
    if (is_capturing(*q.stream)) capturing.insert(*q.stream);
  }

  if (!capturing.empty()) {
    if (capturing.size() > 1 || streams.size() > 1 || streamless)
      return report(ncclInvalidUsage,
                    "a group under graph capture must put all its operations on one "
                    "capturing stream (found " + std::to_string(streams.size()) +
                        " streams, " + std::to_string(capturing.size()) + " capturing" +
                        (streamless ? ", and a communicator split/shrink)" : ")"));
    // At replay there is no caller to return an error to.
    enqueue(*capturing.begin(), [ops = std::move(ops)] {
      try {
        run(ops);
      } catch (const Failure& f) {
        fail(f.what());
      }
    });
    return ncclSuccess;
  }

  // The streams of each communicator with several, for the launch below.
  std::map<const ncclComm*, std::set<cudaStream_t>> per_comm;
  for (const QueuedOp& q : ops)
    if (q.stream) per_comm[q.op->comm()].insert(*q.stream);
  std::vector<std::vector<cudaStream_t>> joined;
  for (const auto& [comm, its] : per_comm)
    if (its.size() > 1) joined.emplace_back(its.begin(), its.end());

  auto result = std::make_shared<ncclResult_t>(ncclSuccess);
  auto work = [ops = std::move(ops), result] {
    try {
      run(ops);
    } catch (const Failure& f) {
      *result = report(f.code, f.what());
    }
  };
  // Not capturing: enqueue runs the work now, in this stream's order.
  if (streams.size() == 1 && !streamless) {
    enqueue(*streams.begin(), std::move(work));
  } else {
    // Each communicator's launch joined to the streams of its operations in the group, as
    // NCCL does, before and after; never one communicator's streams to another's (2.28
    // enqueue.cc ncclLaunchPrepare joins the comm's planner->streams).
    for (const auto& its : joined) join_streams(its.data(), its.size());
    work();
    for (const auto& its : joined) join_streams(its.data(), its.size());
  }
  return *result;
}

}  // namespace

ncclResult_t submit(std::shared_ptr<Exchange> op, std::optional<cudaStream_t> stream) {
  if (tracing())
    std::fprintf(stderr, "nccl_emu TRACE %s%s\n", op->what().c_str(),
                 group.depth > 0 ? " (grouped)" : "");
  if (group.depth > 0) {
    unsigned long long capture = stream ? capture_of(*stream) : kNotCapturing;
    // One communicator's streams in a group are all uncaptured or all in one capture
    // (enqueue.cc ncclPlannerSetCapturingGraph, which looks at a stream when the group
    // first has it): the op that mixes them is refused.
    const auto same_stream = [&](const QueuedOp& q) { return q.stream == stream && q.op->comm() == op->comm(); };
    const auto first = std::find_if(group.queue.begin(), group.queue.end(), same_stream);
    const bool seen = first != group.queue.end();
    if (seen) capture = first->capture;  // as NCCL saw it first
    for (const QueuedOp& q : group.queue)
      if (!seen && stream && q.stream && q.op->comm() == op->comm() && q.capture != capture)
        return report(ncclInvalidUsage,
                      "Streams given to a communicator within a NCCL group must either be all uncaptured or all "
                      "captured by the same graph.");
    group.queue.push_back({std::move(op), stream, capture});
    return ncclSuccess;
  }
  return launch({{std::move(op), stream}});
}

ncclResult_t group_start() {
  ++group.depth;
  return ncclSuccess;
}

ncclResult_t group_error_check(ncclResult_t r) {
  if (group.depth > 0 && r != ncclSuccess && r != ncclInProgress) group.error = r;
  return r;
}

ncclResult_t group_end() {
  if (group.depth == 0)
    return report(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<QueuedOp> ops = std::exchange(group.queue, {});
  // A failed group launches nothing (group.cc ncclGroupEndInternal -> groupCleanup).
  if (const ncclResult_t failed = std::exchange(group.error, ncclSuccess); failed != ncclSuccess) return failed;
  return launch(std::move(ops));
}

ncclResult_t group_discard(bool sim_info_initialized) {
  if (group.depth == 0)
    return report(ncclInvalidUsage, "ncclGroupSimulateEnd without ncclGroupStart");
  if (--group.depth > 0) return ncclSuccess;
  std::vector<QueuedOp> ops = std::exchange(group.queue, {});
  if (const ncclResult_t failed = std::exchange(group.error, ncclSuccess); failed != ncclSuccess) return failed;
  if (!sim_info_initialized)
    return report(ncclInvalidArgument, "ncclSimInfo_t argument not initialized via NCCL_SIM_INFO_INITIALIZER");
  // NCCL still makes the group's splits and shrinks (group.cc groupLaunch runs its async
  // jobs and skips only the launches): the ops on no stream run, the others do not.
  std::erase_if(ops, [](const QueuedOp& q) { return q.stream.has_value(); });
  return launch(std::move(ops));
}

}  // namespace topocoll::emu
