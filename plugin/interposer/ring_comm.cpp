#include "plugin/interposer/ring_comm.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/datatype.h"
#include "plugin/interposer/batch_scratch.h"
#include "plugin/interposer/block_permutation.h"
#include "plugin/interposer/buffer_registration.h"
#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/log.h"
#include "plugin/process_context.h"
#include "plugin/split_placements.h"
#include "sched/ring.h"
#include "sched/ring_order.h"

namespace topocoll::plugin::interposer {

using sched::Collective;


namespace {

// Which of `todo`'s splits NCCL makes together, one ncclGroupStart/End each. NCCL's tuner
// knows a new communicator by its rank and node counts alone, and finds its placement among
// those registered while it is made (split_placements.h): two splits of this batch with the
// same counts and different placements look alike to it, and it leaves both untuned, while a
// rank making only one of them tunes it. Ranks of one split tuned differently pick different
// algorithms and wait for each other. Such a batch is made one placement at a time, in an
// order every rank agrees on (the placement is the same on every rank of its split); splits
// of one placement share a round. Only where topocoll's tuner looks the placements up
// (SplitPlacements::consulted): the rounds serialize what NCCL would make together, and a
// rank that met the same two splits in separate batches, in the other order, would wait for
// this one's later round (docs/usage.md); without the tuner nothing needs it. Without a
// clash the batch is one round, as NCCL would make a user's group.
std::vector<std::vector<std::size_t>> split_rounds(const std::vector<CommState*>& todo,
                                                  const std::vector<std::vector<int>>& placements) {
  std::vector<std::size_t> order(todo.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!SplitPlacements::consulted()) return {order};
  // What the tuner tells splits apart by: ranks and hosts (SplitPlacements::find).
  std::vector<std::pair<std::size_t, std::optional<std::size_t>>> counts;
  for (std::size_t i = 0; i < todo.size(); ++i)
    counts.emplace_back(placements[i].size(), SplitPlacements::host_count(*todo[i]->topology, placements[i]));
  bool clash = false;
  for (std::size_t i = 0; i < todo.size() && !clash; ++i)
    for (std::size_t j = i + 1; j < todo.size() && !clash; ++j)
      clash = counts[i] == counts[j] && placements[i] != placements[j];
  if (!clash) return {order};
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(counts[a], placements[a]) < std::tie(counts[b], placements[b]);
  });
  std::vector<std::vector<std::size_t>> rounds;
  for (std::size_t i : order) {
    if (rounds.empty() || placements[rounds.back().front()] != placements[i]) rounds.emplace_back();
    rounds.back().push_back(i);
  }
  return rounds;
}

// A split made and not adopted, released here, locally: an abort waits for no peer, and a
// split that failed at its group's end still holds NCCL's resources. But a split of a
// communicator whose splits share its resources shares its abort flag too (init.cc
// ncclCommInitChildComm): aborting it would abort the user's communicator, whose later
// kernels would then quit at once and leave their outputs unwritten. That split is
// destroyed instead (no operation ever ran on it). NCCL's destroy of a communicator that
// reports an error returns that error from inside the group it opened, leaving the thread's
// group open, and frees nothing (init.cc: NCCLCHECK(ncclCommEnsureReady)): such a split is
// not destroyed but kept, and aborted with the user's communicator (comm_release).
void release_unadopted_split(CommState& st, ncclComm_t split) {
  if (!st.config.splits_share_resources(process_context().env.nccl_comm_split_share_resources)) {
    pncclCommAbort(split);
    return;
  }
  ncclResult_t failed = ncclSuccess;
  if (pncclCommGetAsyncError(split, &failed) != ncclSuccess) failed = ncclSystemError;
  ncclResult_t r = failed;
  if (failed == ncclSuccess) r = pncclCommDestroy(split);
  if (r == ncclSuccess) return;
  TC_WARN("comm %p rank %d: its unused topology-ordered communicator %p %s (%s); it shares the communicator's "
          "abort flag, so it is aborted only with the communicator, at its destroy or abort",
          static_cast<void*>(st.comm), st.rank, static_cast<void*>(split),
          failed != ncclSuccess ? "reports an error" : "could not be destroyed", pncclGetErrorString(r));
  st.unused_split.store(split);  // one at most: a split not adopted is not made again (ring_comm_failed)
}

}  // namespace

void create_ring_comms(const std::vector<CommState*>& states, const WaitLimit& limit) {
  std::vector<CommState*> todo;
  for (CommState* st : states) {
    if (st->ring_comm || st->ring_comm_failed) continue;
    // Two calls of one communicator in a batch (lazy mode) make one split, not two.
    if (std::find(todo.begin(), todo.end(), st) != todo.end()) continue;
    // Its calls were stopped (an abort from another thread began, a revoke): they run no
    // more (release_fence.h), so nothing is split from it.
    if (st->calls_stopped.load()) continue;
    st->ring_order = sched::topology_aware_ring(*st->topology, st->placement);
    // A permutation of 0..n-1 is the identity exactly when it is sorted.
    st->ring_permutes = !std::is_sorted(st->ring_order.begin(), st->ring_order.end());
    if (!st->ring_permutes) {
      // Same members, same numbering: the split would be the user's communicator again (a
      // second NCCL init for nothing; always so for two ranks). Decided alike on every rank.
      st->ring_comm_failed = true;
      TC_INFO(NCCL_INIT, "comm %p rank %d: the topology-ordered ring is the rank order; "
              "nccl-topo-ring runs on this communicator", static_cast<void*>(st->comm), st->rank);
      continue;
    }
    todo.push_back(st);
  }
  if (todo.empty()) return;
  std::vector<ncclComm_t> made(todo.size(), nullptr);
  std::vector<ncclResult_t> results(todo.size(), ncclSuccess);
  // When something throws after the split (out of host memory in its vote): a split made
  // and neither adopted nor released below is released here, locally, so it does not
  // outlive the user's communicator (which the caller reports out of step; the user aborts
  // it), and every communicator without an adopted split is marked failed, a split made or
  // not: a later call must not split it again alone, its peers not joining.
  struct SplitsNotAdopted {
    std::vector<ncclComm_t>& made;
    const std::vector<CommState*>& todo;
    const int exceptions = std::uncaught_exceptions();
    ~SplitsNotAdopted() {
      const bool thrown = std::uncaught_exceptions() > exceptions;
      for (std::size_t i = 0; i < made.size(); ++i) {
        if (made[i]) release_unadopted_split(*todo[i], std::exchange(made[i], nullptr));
        if (thrown && !todo[i]->ring_comm.load()) todo[i]->ring_comm_failed = true;
      }
    }
  } release_unadopted{made, todo};
  // Allocated before the split: from it on, a rank out of host memory could not vote as its
  // peers do.
  std::vector<ReadyVote> votes;
  std::vector<std::size_t> voter;
  votes.reserve(todo.size());
  voter.reserve(todo.size());
  // Where each split's ranks sit, for NCCL's tuner while NCCL makes them (split_placements.h):
  // split rank j is the user's rank ring_order[j].
  std::vector<std::vector<int>> placements;
  for (const CommState* st : todo) {
    std::vector<int>& endpoints = placements.emplace_back();
    for (int user_rank : st->ring_order) endpoints.push_back(st->placement.endpoint_of_rank.at(std::size_t(user_rank)));
  }
  // NCCL's ncclGroupStart and ncclGroupEnd around each round of splits (split_rounds), per split.
  std::vector<ncclResult_t> started(todo.size(), ncclSuccess), ended(todo.size(), ncclSuccess);
  // Every round's placements made before the first split: nothing allocates between them.
  const std::vector<std::vector<std::size_t>> rounds = split_rounds(todo, placements);
  std::vector<std::vector<std::vector<int>>> round_placements(rounds.size());
  for (std::size_t k = 0; k < rounds.size(); ++k)
    for (std::size_t i : rounds[k]) round_placements[k].push_back(placements[i]);
  SplitPlacements::reserve(todo.size());
  for (std::size_t k = 0; k < rounds.size(); ++k) {
    const std::vector<std::size_t>& round = rounds[k];
    // Only while NCCL makes them (their ncclGroupEnd): a communicator of the same counts made
    // later, during the vote below, is not taken for one.
    const SplitPlacements::Scope tuned_in_ring_order(std::move(round_placements[k]));
    const ncclResult_t r = pncclGroupStart();
    for (std::size_t i : round) {
      if (r != ncclSuccess) break;
      CommState* st = todo[i];
      int key = 0;
      for (std::size_t pos = 0; pos < st->ring_order.size(); ++pos)
        if (st->ring_order[pos] == st->rank) key = int(pos);
      // The user's config (CTA limits, traffic class, ...: comm_config.h). The split has
      // buffers, proxy threads and a net context of its own unless the user's communicator
      // was made with splitShare=1 (NCCL decides by the parent's config, not the split's).
      ncclConfig_t config = st->config.for_split();
      results[i] = pncclCommSplit(st->comm, 0, key, &made[i], &config);
    }
    const ncclResult_t end = pncclGroupEnd();
    for (std::size_t i : round) started[i] = r, ended[i] = end;
  }
  // A split can fail on one rank only (its device memory, its proxy) while NCCL completes
  // it on the others: a rank on the user's communicator and its peers on the split would
  // each wait for the other. So every rank votes on its own outcome over the user's
  // communicator (agree_ready: one 4-byte allreduce, polled, ended by an abort) and adopts
  // its split only when every rank made one.
  for (std::size_t i = 0; i < todo.size(); ++i) {
    CommState* st = todo[i];
    if (st->calls_stopped.load() || st->ring_comm_taken.load()) {
      // Released meanwhile (the user's communicator may be gone already): nothing more goes
      // to it; a split made is released the way the release would (adopt_ring_comm).
      if (made[i]) adopt_ring_comm(*st, std::exchange(made[i], nullptr));
      else st->ring_comm_failed = true;
      continue;
    }
    ReadyVote v;
    v.comm = st->comm;
    v.device = st->device;
    v.ready = started[i] == ncclSuccess && ended[i] == ncclSuccess && results[i] == ncclSuccess && made[i];
    v.abandon = &st->calls_stopped;
    v.cell = st->vote_cell.get();
    v.limit = limit;
    v.what = "the topocoll vote on the topology-ordered split";
    votes.push_back(std::move(v));
    voter.push_back(i);
  }
  agree_ready(votes, leave_stopped_communicators);
  for (std::size_t k = 0; k < votes.size(); ++k) {
    const std::size_t i = voter[k];
    CommState* st = todo[i];
    const ReadyVote& v = votes[k];
    if (v.all_ready) {
      TC_INFO(NCCL_INIT, "comm %p rank %d: topology-ordered communicator %p created",
              static_cast<void*>(st->comm), st->rank, static_cast<void*>(made[i]));
      adopt_ring_comm(*st, std::exchange(made[i], nullptr));
      continue;
    }
    // Not adopted: released here, locally.
    if (made[i]) release_unadopted_split(*st, std::exchange(made[i], nullptr));
    st->ring_comm_failed = true;
    if (!v.known && !v.abandoned) {
      // Its peers may have adopted theirs while this rank cannot know: its nccl-topo-ring
      // calls on the user's communicator would meet theirs on the split.
      st->out_of_step = ncclSystemError;
      TC_WARN("comm %p rank %d: topology-ordered communicator not used: %s, so this rank cannot know whether its "
              "peers use theirs; the communicator is out of step with its peers and ncclCommGetAsyncError "
              "reports ncclSystemError for it: abort it",
              static_cast<void*>(st->comm), st->rank, v.error.empty() ? "the vote on it was not read back" : v.error.c_str());
      continue;
    }
    const char* why = !v.ready           ? "it could not be created on this rank"
                      : v.abandoned      ? "the user's communicator was aborted or revoked meanwhile"
                      : !v.error.empty() ? v.error.c_str()
                                         : "another rank could not create it";
    TC_WARN("comm %p rank %d: topology-ordered communicator not used (%s); nccl-topo-ring runs "
            "on the user's communicator", static_cast<void*>(st->comm), st->rank, why);
  }
}

// NCCL's collective on the topology-ordered communicator. Allreduce runs there as called;
// reduce-scatter and allgather number their blocks by ring_comm's ranks, so unless that
// order is the user's, reduce-scatter reads its input permuted into scratch and allgather
// writes scratch that is then permuted into the user's buffer: results land as NCCL's
// would on the user's communicator.
ncclResult_t run_ring_calls(std::vector<PendingCollective>& calls) {
  if (calls.empty()) return ncclSuccess;
  // Creating a communicator is not allowed while a stream is being captured (NCCL allocates
  // device memory): such calls use the user's communicator until one is created outside a
  // capture. Capture is the same on every rank of an SPMD program, so all decide alike.
  std::vector<CommState*> states;
  for (const auto& c : calls)
    if (!stream_capturing(c.call.stream)) states.push_back(c.state.get());
    else if (!c.state->ring_comm)
      TC_ONCE(TC_INFO(NCCL_COLL, "topology-ordered communicator not created during CUDA graph "
                                 "capture; captured calls use the user's communicator"));
  create_ring_comms(states, WaitLimit::for_a_call(interposer_config().vote_timeout_s));
  // A split waits for every rank: an abort from another thread or a revoke may have come
  // meanwhile, or a release that gave up waiting have gone on.
  const ncclResult_t aborted = drop_released_calls(calls, DropCalls::OfStopped,
                                                   "while its topology-ordered communicator was made");
  // A split vote this rank could not read back left its communicator out of step: its
  // peers may run the call on their splits, so it runs nowhere here.
  const ncclResult_t stepped = drop_out_of_step_calls(calls);
  if (calls.empty()) return aborted != ncclSuccess ? aborted : stepped;

  CurrentDeviceGuard device_guard;
  std::vector<std::size_t> needs(calls.size(), 0);
  std::vector<std::size_t> blocks(calls.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const PendingCollective& c = calls[i];
    if (!c.state->ring_comm || c.call.collective == Collective::AllReduce ||
        !c.state->ring_permutes)
      continue;
    blocks[i] = c.call.count * kernels::datatype_size(kernels::DataType(int(c.call.datatype)));
    needs[i] = blocks[i] * std::size_t(c.state->nranks);
  }
  std::vector<char*> regions;
  std::vector<ScratchOutcome> outcomes;
  if (!reserve_batch_scratch(calls, needs, device_guard, regions, outcomes)) return ncclSystemError;
  const ncclResult_t released = report_released(calls, outcomes);
  // A call without its permutation scratch runs on the user's communicator (every rank of
  // it decided alike), where NCCL's block order is already the user's.
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (outcomes[i] != ScratchOutcome::Served) needs[i] = 0;
  auto permute = [&](std::size_t i, bool to_ring) {
    const CollectiveCall& call = calls[i].call;
    char* user = static_cast<char*>(to_ring ? const_cast<void*>(call.sendbuff) : call.recvbuff);
    device_guard.use(calls[i].state->device);
    const cudaError_t e =
        permute_blocks(calls[i].state->ring_order, to_ring, user, regions[i], blocks[i], call.stream);
    if (e == cudaSuccess) return ncclSuccess;
    TC_WARN("comm %p: permuting blocks for the topology-ordered communicator failed: %s",
            static_cast<void*>(calls[i].state->comm), cudaGetErrorString(e));
    // Before the group, this rank issues no collective its peers issue; after it, the
    // user's buffer holds blocks out of order: either way out of step.
    mark_out_of_step(*calls[i].state, "permuting blocks for the topology-ordered communicator");
    return ncclUnhandledCudaError;
  };

  // Stream order: reduce-scatter inputs are permuted before NCCL's group is enqueued (at
  // its end), allgather outputs after.
  ncclResult_t r = ncclSuccess;
  for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i)
    if (needs[i] > 0 && calls[i].call.collective == Collective::ReduceScatter) r = permute(i, true);
  if (r != ncclSuccess) {
    // None of the batch's collectives goes out on this rank; its peers issue all of them.
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (outcomes[i] != ScratchOutcome::Released && outcomes[i] != ScratchOutcome::Failed)
        mark_out_of_step(*calls[i].state, "a batch whose block permutation failed");
    mark_batch_scratch_used(calls, needs, device_guard);  // the permutes queued so far use it
    return r;
  }
  r = pncclGroupStart();
  for (std::size_t i = 0; i < calls.size() && r == ncclSuccess; ++i) {
    if (outcomes[i] == ScratchOutcome::Released || outcomes[i] == ScratchOutcome::Failed) continue;
    CollectiveCall call = calls[i].call;
    const ncclComm_t comm = calls[i].state->ring_comm && outcomes[i] == ScratchOutcome::Served
                                ? calls[i].state->ring_comm.load()
                                : call.comm;
    if (needs[i] > 0 && call.collective == Collective::ReduceScatter) call.sendbuff = regions[i];
    if (needs[i] > 0 && call.collective == Collective::AllGather) call.recvbuff = regions[i];
    r = forward_collective(call, comm);
  }
  const ncclResult_t end = pncclGroupEnd();
  if (r == ncclSuccess) r = end;
  // Every allgather ran: each one's output is permuted, or marked where that fails.
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (needs[i] > 0 && calls[i].call.collective == Collective::AllGather)
      if (const ncclResult_t e = permute(i, false); r == ncclSuccess) r = e;
  mark_batch_scratch_used(calls, needs, device_guard);
  return r != ncclSuccess ? r : released != ncclSuccess ? released : aborted != ncclSuccess ? aborted : stepped;
}

}  // namespace topocoll::plugin::interposer
