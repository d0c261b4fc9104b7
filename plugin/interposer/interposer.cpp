#include "plugin/interposer/interposer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "exec/engine.h"
#include "exec/nccl_backend.h"
#include "kernels/datatype.h"
#include "plugin/interposer/batch_scratch.h"
#include "plugin/interposer/route_decision.h"
#include "plugin/interposer/collective_queue.h"
#include "plugin/interposer/comm_lifecycle.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/group_streams.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/interposer/ring_comm.h"
#include "plugin/interposer/step_times_log.h"
#include "plugin/interposer/thread_group.h"
#include "plugin/log.h"
#include "sched/nccl_tests_sizes.h"

// The dispatch of served calls: decide (route cache), then forward to NCCL, queue inside a
// user group, or run (topology-ordered NCCL: ring_comm.h; a schedule: the engine on the
// NCCL/CUDA backend). Communicator init and release: comm_lifecycle.cpp.
namespace topocoll::plugin::interposer {
namespace {

using sched::Collective;

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "allreduce";
    case Collective::ReduceScatter: return "reducescatter";
    case Collective::AllGather: return "allgather";
    case Collective::AllToAll: return "alltoall";
  }
  return "?";
}

bool op_supported(ncclRedOp_t op) { return int(op) >= 0 && int(op) < int(ncclNumOps); }
// Both NCCL's header and topocoll's kernels must know the type: a newer nccl.h may number
// types the kernels have no size or reduction for (elem would be 0).
bool type_supported(ncclDataType_t t) {
  return int(t) >= 0 && int(t) < int(ncclNumTypes) && kernels::is_valid(kernels::DataType(int(t)));
}

// NCCL refuses fp8 collectives (ncclInvalidArgument) on a communicator with a GPU below sm_90
// (src/enqueue.cc, taskAppend: comm->minCompCap < 90): every one up to 2.27, only the
// reductions from 2.28 on (allgather, broadcast and all-to-all move bytes). topocoll's kernels
// could run them, but such calls go to NCCL, so the answer is NCCL's at every size and route.
// The version is the library's, asked at the call (fp8 calls only).
bool nccl_refuses(const CollectiveCall& call, int min_compute_capability) {
  const auto type = kernels::DataType(int(call.datatype));  // numbered as nccl.h numbers them
  if (type != kernels::DataType::Fp8E4M3 && type != kernels::DataType::Fp8E5M2) return false;
  if (min_compute_capability >= 90) return false;
  int version = 0;
  if (pncclGetVersion(&version) != ncclSuccess || version < NCCL_VERSION(2, 28, 0)) return true;
  return call.collective == Collective::AllReduce || call.collective == Collective::ReduceScatter;
}

// Logs the decision for (collective, power-of-two size) once per communicator.
void log_decision(CommState& st, const CollectiveCall& call, std::size_t bytes, const Route& route) {
  const int bucket = bytes <= 1 ? 0 : std::min(63, int(std::bit_width(bytes - 1)));
  const uint64_t bit = uint64_t(1) << bucket;
  auto& word = st.logged_buckets[std::size_t(call.collective)];
  // A plain load first: the read-modify-write (a locked instruction) only the first time.
  if (word.load(std::memory_order_relaxed) & bit) return;
  if (word.fetch_or(bit, std::memory_order_relaxed) & bit) return;
  TC_INFO(NCCL_COLL | NCCL_TUNING, "comm %p rank %d/%d %s up to %llu B -> %s (%s)",
          static_cast<void*>(st.comm), st.rank, st.nranks, collective_name(call.collective),
          static_cast<unsigned long long>(uint64_t(1) << bucket), route.algo.c_str(),
          route.reason.c_str());
}

// Whether NCCL defines the call's aliasing (disjoint buffers, or NCCL's in-place layout);
// otherwise (partial overlap, in-place all-to-all) NCCL leaves the data undefined.
bool buffers_understood(const CollectiveCall& call, const CommState& st, std::size_t elem) {
  const char* in = static_cast<const char*>(call.sendbuff);
  const char* out = static_cast<const char*>(call.recvbuff);
  const std::size_t n = std::size_t(st.nranks);
  std::size_t in_bytes = call.count * elem, out_bytes = call.count * elem;
  switch (call.collective) {
    case Collective::AllReduce: if (in == out) return true; break;
    case Collective::ReduceScatter:
      in_bytes *= n;
      if (in + std::size_t(st.rank) * call.count * elem == out) return true;
      break;
    case Collective::AllGather:
      out_bytes *= n;
      if (out + std::size_t(st.rank) * call.count * elem == in) return true;
      break;
    case Collective::AllToAll:
      in_bytes *= n;
      out_bytes *= n;
      break;
  }
  const bool disjoint = in + in_bytes <= out || out + out_bytes <= in;
  return disjoint;
}

// Out of host memory on a served call's path (planning it, queueing it, running it): its
// peers, with memory to spare, serve the call and this rank cannot know how far it got, so
// nothing more runs on the communicator (CommState::out_of_step, as after a vote whose
// outcome is unknown); the user aborts it on the error. Allocates nothing.
ncclResult_t out_of_host_memory(CommState& st, const CollectiveCall& call, const char* doing) {
  st.out_of_step = ncclSystemError;
  TC_WARN("comm %p: out of host memory while %s %s of %lld elements: the communicator is marked "
          "failed (ncclSystemError), as this rank cannot know what its peers ran",
          static_cast<void*>(st.comm), doing, collective_name(call.collective), static_cast<long long>(call.count));
  return ncclSystemError;
}

std::shared_ptr<const Route> route_for(CommState& st, const CollectiveCall& call, std::size_t elem) {
  const CallKey key{call.collective, int(call.datatype), int64_t(call.count)};
  RouteRequest in;
  in.topology = st.topology.get();
  in.placement = &st.placement;
  in.rank = st.rank;
  in.key = key;
  in.elem_bytes = elem;
  // Settled by the settings: neither planned nor cached, so nothing allocates on the way
  // to NCCL.
  if (auto settled = route_settled_by_config(in, interposer_config())) return settled;
  if (auto route = st.routes.find(key)) return route;
  // std::bad_alloc goes to the caller (serve_collective): the peers plan the same call with
  // memory to spare and may serve it, so no route to NCCL may stand in for it.
  return st.routes.insert(key, decide_route(in, interposer_config()));
}

// The kernels' op for a call: its own for reductions, Sum (unused) for data movement.
kernels::ReduceOp reduce_op_of(const CollectiveCall& call) {
  return call.collective == Collective::AllReduce || call.collective == Collective::ReduceScatter
             ? kernels::ReduceOp(int(call.op))
             : kernels::ReduceOp::Sum;
}

// The step timelines (TOPOCOLL_STEP_TIMES) of one batch's collectives: each begun as it is
// queued, all ended with the batch. They advance step by step together
// (exec::run_interleaved), so each one's step is the round's: the label says so ("..., one
// of a batch of 3"), and perf/gpu's record, which reads single collectives only, leaves such
// lines out.
class TimedSteps {
 public:
  explicit TimedSteps(std::size_t batch) : batch_(batch) { begun_.reserve(batch); }
  exec::StepTimeline::Recording* begin(CommState& st, const PendingCollective& c, kernels::DataType dtype) {
    const std::size_t elem = kernels::datatype_size(dtype);
    const sched::Schedule& schedule = *c.route->schedule;
    const int64_t bytes = sched::size_of_count(c.call.collective, int64_t(c.call.count), elem, st.nranks);
    std::string label =
        std::string(collective_name(c.call.collective)) + " " + std::to_string(bytes) + " B " + c.route->algo;
    if (batch_ > 1) label += ", one of a batch of " + std::to_string(batch_);
    exec::StepTimeline::Recording* r = st.step_timeline->begin(std::move(label), step_bytes_sent(schedule, st.rank, elem));
    if (r) begun_.push_back({st.step_timeline.get(), r});
    return r;
  }
  void end(bool completed) noexcept {
    for (auto& [timeline, recording] : begun_) timeline->end(recording, completed);
    begun_.clear();
  }
  ~TimedSteps() { end(false); }

 private:
  std::size_t batch_;
  std::vector<std::pair<exec::StepTimeline*, exec::StepTimeline::Recording*>> begun_;  // reserved: push never throws
};

// Runs schedule-routed collectives on the NCCL/CUDA backend, step by step across them.
ncclResult_t run_schedules(const std::vector<PendingCollective>& calls) {
  if (calls.empty()) return ncclSuccess;
  CurrentDeviceGuard device_guard;
  std::vector<std::size_t> needs;
  // The most any rank needs, so every rank's scratch grows at the same call (batch_scratch.h).
  for (const PendingCollective& c : calls)
    needs.push_back(exec::max_scratch_bytes(*c.route->schedule, kernels::DataType(int(c.call.datatype)),
                                            reduce_op_of(c.call)));
  std::vector<char*> regions;
  std::vector<ScratchOutcome> outcomes;
  if (!reserve_batch_scratch(calls, needs, device_guard, regions, outcomes)) return ncclSystemError;
  const ncclResult_t released = report_released(calls, outcomes);
  // Calls without scratch go to NCCL on the user's communicator, in one group.
  if (std::find(outcomes.begin(), outcomes.end(), ScratchOutcome::ToNccl) != outcomes.end()) {
    ncclResult_t r = pncclGroupStart();
    for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i)
      if (outcomes[i] == ScratchOutcome::ToNccl) r = forward_collective(calls[i].call, calls[i].call.comm);
    const ncclResult_t end = pncclGroupEnd();
    if (r != ncclSuccess || end != ncclSuccess) {
      // The batch's schedules do not run here; its peers run theirs.
      for (std::size_t i = 0; i < calls.size(); ++i)
        if (outcomes[i] == ScratchOutcome::Served) mark_out_of_step(*calls[i].state, "a batch whose NCCL group failed");
      return r != ncclSuccess ? r : end;
    }
  }
  CollectiveQueue queue;
  std::vector<std::shared_ptr<exec::NcclBackend>> backends;
  TimedSteps timed(calls.size());
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (outcomes[i] != ScratchOutcome::Served) {
      needs[i] = 0;  // no use of its scratch to record
      continue;
    }
    const PendingCollective& c = calls[i];
    CommState* st = c.state.get();
    device_guard.use(st->device);
    QueuedCollective q;
    q.schedule = c.route->schedule;
    q.rank = st->rank;
    q.dtype = kernels::DataType(int(c.call.datatype));
    q.op = reduce_op_of(c.call);
    q.buffers = {c.call.sendbuff, c.call.recvbuff, regions[i]};
    // A call being captured into a CUDA graph runs its pipelined steps without the lane:
    // overlap there would need the lane's fork and join captured with it, which the host
    // emulation cannot check (exec/nccl_backend.h). Same bytes either way.
    const bool capturing = stream_capturing(c.call.stream);
    exec::OverlapLane* lane = capturing ? nullptr : st->overlap_lane.get();
    backends.push_back(std::make_shared<exec::NcclBackend>(st->comm, c.call.stream, st->device, lane));
    // Not inside a CUDA graph capture: its events would be the graph's, never read here.
    if (st->step_timeline && !capturing) backends.back()->time_steps(timed.begin(*st, c, q.dtype));
    q.backend = backends.back();
    queue.push(std::move(q));
  }
  try {
    queue.run_all();
  } catch (...) {
    // Innermost first, as NCCL groups close; then the error goes to the entry point.
    for (auto it = backends.rbegin(); it != backends.rend(); ++it) (*it)->close_open_batches();
    timed.end(false);
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (outcomes[i] == ScratchOutcome::Served) mark_out_of_step(*calls[i].state, "a schedule's collective");
    // The steps queued before the failure still use the scratch: its next free or growth
    // (the abort a job makes next) waits for them.
    mark_batch_scratch_used(calls, needs, device_guard);
    throw;
  }
  timed.end(true);
  mark_batch_scratch_used(calls, needs, device_guard);
  return released;
}

ncclResult_t run_pending(std::vector<PendingCollective>& pending) {
  ServedCallsInside inside(pending);  // not const: a vote's wait leaves stopped ones early
  const ncclResult_t released = drop_released_calls(pending, DropCalls::OfReleasingOrStopped, "before it ran");
  const ncclResult_t stepped = drop_out_of_step_calls(pending);
  const ncclResult_t dropped = released != ncclSuccess ? released : stepped;
  std::vector<PendingCollective> ring, schedules;
  for (auto& p : pending) (p.route->target == RouteTarget::NcclTopoRing ? ring : schedules).push_back(p);
  // `pending` keeps the calls it runs: a caller that catches std::bad_alloc marks each of
  // their communicators out of step (group_end), whichever part ran before memory ran out.
  ncclResult_t r = run_ring_calls(ring);
  const ncclResult_t s = run_schedules(schedules);
  return dropped != ncclSuccess ? dropped : r != ncclSuccess ? r : s;
}

}  // namespace

bool interposer_enabled() { return interposer_config().enable; }

ncclResult_t forward_collective(const CollectiveCall& c, ncclComm_t comm) {
  switch (c.collective) {
    case Collective::AllReduce:
      return pncclAllReduce(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case Collective::ReduceScatter:
      return pncclReduceScatter(c.sendbuff, c.recvbuff, c.count, c.datatype, c.op, comm, c.stream);
    case Collective::AllGather:
      return pncclAllGather(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
    case Collective::AllToAll:
      return pncclAlltoAll(c.sendbuff, c.recvbuff, c.count, c.datatype, comm, c.stream);
  }
  return ncclInvalidArgument;
}

ncclResult_t serve_collective(const CollectiveCall& call) {
  // Held for the whole call (and while queued in a group): see served_state.
  std::shared_ptr<CommState> st = served_state(call.comm);
  if (!st) return forward_collective(call, call.comm);
  const bool reduces = call.collective == Collective::AllReduce ||
                       call.collective == Collective::ReduceScatter;
  // Revoked (ncclCommRevoke, or a shrink with NCCL_SHRINK_ABORT): NCCL refuses the call
  // before anything else (enqueue.cc ncclEnqueueCheck), and so the group; so does topocoll,
  // whatever the route (a queued call would otherwise fail only after NCCL's part ran).
  if (st->revoked.load()) {
    TC_WARN("%s: communicator %p was revoked", collective_name(call.collective), static_cast<void*>(call.comm));
    return fail_users_group(ncclInvalidUsage, collective_name(call.collective));
  }
  // Out of step with its peers (a vote's outcome this rank cannot know): nothing more runs
  // here. NCCL refuses the communicator's operations too (its enqueue asks the exported
  // ncclCommGetAsyncError), but that is not left to chance.
  if (const ncclResult_t e = st->out_of_step.load(); e != ncclSuccess) {
    char why[256];
    std::snprintf(why, sizeof why,
                  "topocoll: communicator %p rank %d is out of step with its peers (a topocoll vote or call failed "
                  "on it before: see that WARN); it runs nothing more: abort it",
                  static_cast<void*>(st->comm), st->rank);
    set_last_warning_on_this_thread(why);
    return fail_users_group(e, collective_name(call.collective));
  }
  // Its stream, for the group's end to join with the others of the communicator's calls;
  // refused, as NCCL refuses it, when it is captured otherwise than they are (topocoll takes
  // calls out of NCCL's group, where NCCL would not see them together). Not for a call NCCL
  // drops or refuses before it looks at the stream (argcheck.cc ArgsCheck: a datatype or op
  // out of range; enqueue.cc taskAppend: an empty collective, an fp8 reduction below sm_90,
  // a one-rank communicator's launch), which topocoll sends to NCCL as it is.
  const bool nccl_looks_at_stream = call.count > 0 && st->nranks > 1 && int(call.datatype) >= 0 &&
                                    int(call.datatype) < int(ncclNumTypes) && (!reduces || int(call.op) >= 0) &&
                                    !nccl_refuses(call, st->min_compute_capability);
  GroupStream group_stream;
  if (ThreadGroup& g = thread_group(); g.depth.inside() && nccl_looks_at_stream) {
    group_stream = {call.comm, call.stream, st->device, stream_capture_id(call.stream)};
    if (!captured_alike(g.streams, group_stream)) {
      TC_WARN("Streams given to a communicator within a NCCL group must either be all uncaptured or all captured "
              "by the same graph (communicator %p, %s on stream %p)",
              static_cast<void*>(call.comm), collective_name(call.collective), static_cast<void*>(call.stream));
      return fail_users_group(ncclInvalidUsage, collective_name(call.collective));
    }
    note_group_call(g.streams, group_stream, false);
  }
  if (!type_supported(call.datatype)) return forward_collective(call, call.comm);
  if (nccl_refuses(call, st->min_compute_capability)) return forward_collective(call, call.comm);
  if (reduces && !op_supported(call.op)) {
    TC_FALLBACK_ONCE("user-defined reduction ops (ncclRedOpCreatePreMulSum) go to NCCL");
    return forward_collective(call, call.comm);
  }
  if (call.count == 0 || !call.sendbuff || !call.recvbuff) return forward_collective(call, call.comm);
  // NCCL_CHECK_POINTERS=1: NCCL refuses a buffer that is not device memory of the
  // communicator's GPU before anything runs; a schedule would launch on it. Such a call goes
  // to NCCL, which refuses it with its WARN (its peers' calls wait, as under NCCL).
  if (interposer_config().check_pointers && !(nccl_accepts_pointer(call.sendbuff, st->device) &&
                                              nccl_accepts_pointer(call.recvbuff, st->device)))
    return forward_collective(call, call.comm);
  const std::size_t elem = kernels::datatype_size(kernels::DataType(int(call.datatype)));
  // Served all the same: each rank sees only its own pointers, so sending this rank's call
  // to NCCL while a peer with a valid layout serves its part (sendbuff == recvbuff on every
  // rank is in place on rank 0 alone) would leave both waiting forever. The data is as
  // undefined as NCCL leaves it; the buffers stay the user's and no step waits on data.
  if (!buffers_understood(call, *st, elem))
    TC_ONCE(TC_WARN("%s with overlapping buffers NCCL does not define (partial overlap, or in place "
                    "where NCCL's in-place layout is not met): its data is undefined, under NCCL too",
                    collective_name(call.collective)));
  try {
    std::shared_ptr<const Route> route = route_for(*st, call, elem);
    log_decision(*st, call,
                 std::size_t(sched::size_of_count(call.collective, int64_t(call.count), elem, st->nranks)),
                 *route);

    switch (route->target) {
      case RouteTarget::Nccl:
        return forward_collective(call, call.comm);
      case RouteTarget::NcclTopoRing:
        if (st->ring_comm_failed) return forward_collective(call, call.comm);
        // Straight through when no block needs permuting; else after NCCL's group (queued).
        if (const ncclComm_t ring = st->ring_comm.load();
            ring && (call.collective == Collective::AllReduce || !st->ring_permutes)) {
          // Another communicator than the group's others: NCCL joins streams per communicator.
          if (ThreadGroup& g = thread_group(); g.depth.inside() && group_stream.comm)
            note_group_call(g.streams, group_stream, true);
          return forward_collective(call, ring);
        }
        break;
      case RouteTarget::Schedule:
        break;
    }
    ThreadGroup& g = thread_group();
    std::vector<PendingCollective> one{{st, call, route}};
    if (g.depth.inside()) {
      g.collectives.push_back(one[0]);
      return ncclSuccess;
    }
    return run_pending(one);
  } catch (const std::bad_alloc&) {
    // Planning, queueing or running it: its peers do what this rank could not.
    return fail_users_group(out_of_host_memory(*st, call, "serving"), collective_name(call.collective));
  }
}

ncclResult_t fail_users_group(ncclResult_t r, const char* call_name) {
  ThreadGroup& g = thread_group();
  if (r == ncclSuccess || r == ncclInProgress || !g.depth.inside()) return r;
  const bool first = g.failed == ncclSuccess;
  g.failed = r;
  if (!first) return r;
  // NCCL's group error can be set from outside only by a call NCCL refuses: a collective on a
  // null communicator, refused before it touches anything (enqueue.cc ncclEnqueueCheck ->
  // CommCheck -> ncclGroupErrCheck; so since NCCL 2.19). Its WARN is explained first; the
  // caller's own warning stays the one ncclGetLastError answers with.
  char own[1024];
  std::snprintf(own, sizeof own, "%s", last_warning_on_this_thread());
  TC_WARN("%s failed inside a group: the group fails at its ncclGroupEnd and launches none of its calls, as "
          "NCCL fails a group with a failed call; NCCL's warning of a NULL comm that follows is topocoll "
          "failing NCCL's part of the group",
          call_name);
  (void)pncclAllReduce(nullptr, nullptr, 0, ncclFloat32, ncclSum, nullptr, nullptr);
  set_last_warning_on_this_thread(own);
  return r;
}

namespace {

// Joins the group's streams (group_streams.h) when topocoll took calls out of NCCL's group
// and the group has several streams; a failure is the group's result, its calls run anyway
// (their peers wait for them).
ncclResult_t join_streams_of(const GroupStreamsSeen& seen, const std::vector<ncclComm_t>& comms, const char* when) {
  if (seen.lost)
    TC_ONCE(TC_WARN("ncclGroupEnd: out of host memory while noting the group's streams: its calls on other "
                    "streams may not be ordered after topocoll's"));
  std::string error;
  if (join_group_streams(seen, comms, &error) == cudaSuccess) return ncclSuccess;
  TC_WARN("ncclGroupEnd: joining the group's streams %s its topocoll calls failed (%s): work queued on "
          "them may not see those calls' results",
          when, error.c_str());
  return ncclUnhandledCudaError;
}

}  // namespace

ncclResult_t group_start() {
  // Counted only when NCCL's group opened: the two depths stay in step, and a user who sees
  // the start fail does not end a group.
  const ncclResult_t r = pncclGroupStart();
  if (r == ncclSuccess) thread_group().depth.enter();
  return r;
}

ncclResult_t group_end() {
  ThreadGroup& g = thread_group();
  if (!g.depth.inside()) return pncclGroupEnd();  // no open group: NCCL reports the misuse
  // NCCL's end of the group launches each communicator's calls joined to the streams NCCL
  // saw them on: a call moved to the topology-ordered split to the split's streams alone, a
  // call left to NCCL on the user's communicator to the streams of its NCCL calls, not those
  // of the calls topocoll queued. Before that launch, the streams of each communicator with
  // calls topocoll took out are joined, so every call starts after the work queued before
  // the group on any of them, as NCCL would start them all. (Not for a group failing anyway.)
  ncclResult_t taken_out_joined = ncclSuccess;
  if (g.depth.depth() == 1 && g.failed == ncclSuccess && (!g.streams.moved.empty() || !g.collectives.empty()) &&
      any_communicator_on_several_streams(g.streams)) {
    try {
      std::vector<ncclComm_t> comms = g.streams.moved;
      for (const PendingCollective& c : g.collectives) comms.push_back(c.call.comm);
      taken_out_joined = join_streams_of(g.streams, comms, "before");
    } catch (...) {  // std::bad_alloc: nothing else throws there
      // Unjoined, NCCL's part could read what is not written yet: the group fails whole,
      // and every communicator with a served call in it is out of step (their peers run
      // the group).
      for (const GroupStream& s : g.streams.streams)
        if (const std::shared_ptr<CommState> st = served_state(s.comm))
          mark_out_of_step(*st, "a user group (out of host memory joining its streams)");
      fail_users_group(ncclSystemError, "ncclGroupEnd (out of host memory joining the group's streams)");
    }
  }
  g.depth.leave();
  const ncclResult_t nccl = pncclGroupEnd();
  if (g.depth.inside()) return nccl;
  // A served call topocoll failed in the group failed NCCL's part too (fail_users_group):
  // the group's result is that call's, and none of topocoll's part runs either.
  const ncclResult_t refused = std::exchange(g.failed, ncclSuccess);
  // Outermost end: NCCL's group is closed; finish inits, then the queued collectives.
  std::vector<PendingCollective> queued;
  queued.swap(g.collectives);  // empty afterwards even if an init or a collective throws
  const GroupStreamsSeen seen = std::exchange(g.streams, {});
  bool init_out_of_memory = false;
  try {
    children_created(g.children, nccl);
    if (nccl != ncclSuccess && nccl != ncclInProgress) inits_failed_in_group(g.inits, nccl);
    else finish_inits(g.inits);
  } catch (const std::bad_alloc&) {
    // As outside a group (nccl_entry.cpp, after_create): peers may wait in topocoll's init
    // collectives for this rank, so the group's end reports the failure.
    init_out_of_memory = true;
    TC_WARN("out of host memory during topocoll's init of the group's communicators; ncclGroupEnd fails "
            "with ncclSystemError (their peers may wait for this rank): abort them");
  } catch (const std::exception& e) {
    // As outside a group: a failed topocoll init leaves the communicator to NCCL and never
    // fails the user's call, nor keeps the queued collectives from running.
    TC_WARN("topocoll communicator init failed: %s", e.what());
  }
  // Never exchanged later, at some other init of this thread that its peers do not match.
  g.children.clear();
  g.inits.clear();
  if (refused != ncclSuccess || (nccl != ncclSuccess && nccl != ncclInProgress)) {
    // NCCL's failed group launches none of its operations (group.cc groupCleanup): nor do
    // ours, so a caller retrying the group after the error runs each reduction once.
    // (The refused call's WARN said so already, and stays ncclGetLastError's answer.)
    const ncclResult_t failed = refused != ncclSuccess ? refused : nccl;
    if (!queued.empty() && refused == ncclSuccess)
      TC_WARN("ncclGroupEnd failed (%s): its %zu topocoll collective(s) are dropped, as NCCL drops its own",
              pncclGetErrorString(failed), queued.size());
    return failed;
  }
  // NCCL ran the rest of the group as if posted on every one of its streams; topocoll's part
  // is joined to them the same way, per communicator: its calls started after the work on
  // any of their communicator's streams before the group (the join before NCCL's end), and
  // work queued on any of them after the group sees theirs (the join after them).
  ncclResult_t ours = ncclSuccess, joined = ncclSuccess;
  try {
    std::vector<ncclComm_t> comms;
    for (const PendingCollective& c : queued) comms.push_back(c.call.comm);
    ours = run_pending(queued);
    comms.insert(comms.end(), seen.moved.begin(), seen.moved.end());
    joined = join_streams_of(seen, comms, "after");
  } catch (const std::bad_alloc&) {
    // Which of the group's calls ran before memory ran out is this rank's to know alone.
    for (const PendingCollective& c : queued) ours = out_of_host_memory(*c.state, c.call, "running a group's");
    if (queued.empty()) {
      TC_WARN("ncclGroupEnd: out of host memory while joining the group's streams: work queued on them may not "
              "see the results of its calls on the topology-ordered split");
      ours = ncclSystemError;
    }
  }
  if (nccl != ncclSuccess) return nccl;
  if (init_out_of_memory) return ncclSystemError;
  if (ours != ncclSuccess) return ours;
  return taken_out_joined != ncclSuccess ? taken_out_joined : joined;
}

ncclResult_t group_simulate_end(ncclSimInfo_t* info) {
  // Without a simInfo NCCL launches the group as ncclGroupEnd does (group.cc
  // ncclGroupEndInternal simulates only for a given simInfo): so do we.
  if (!info) return group_end();
  ThreadGroup& g = thread_group();
  if (!g.depth.leave()) return pncclGroupSimulateEnd(info);
  const ncclResult_t nccl = pncclGroupSimulateEnd(info);
  if (g.depth.inside()) return nccl;
  if (!g.collectives.empty())
    TC_ONCE(TC_WARN("ncclGroupSimulateEnd: topocoll collectives queued in the group are not run "
                    "(NCCL launches none of the group's operations)"));
  g.collectives.clear();
  // NCCL did make the group's communicators (group.cc asyncJobLaunch runs a simulated
  // group's inits and splits too): known to topocoll, left to NCCL, with no exchange (no
  // collective of ours in a group the user only simulated).
  try {
    comms_created_in_simulated_group(g.inits, g.children, nccl);
  } catch (const std::exception& e) {
    TC_WARN("topocoll: noting the communicators of a simulated group failed: %s", e.what());
  }
  g.inits.clear();
  g.children.clear();
  g.streams = {};
  const ncclResult_t refused = std::exchange(g.failed, ncclSuccess);
  return refused != ncclSuccess ? refused : nccl;
}

}  // namespace topocoll::plugin::interposer
