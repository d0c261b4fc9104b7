#include "plugin/interposer/batch_scratch.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "plugin/interposer/cuda_probe.h"
#include "plugin/interposer/device_scratch.h"
#include "plugin/interposer/interposer.h"
#include "plugin/interposer/interposer_config.h"
#include "plugin/interposer/rank_exchange.h"
#include "plugin/interposer/release_fence.h"
#include "plugin/log.h"

namespace topocoll::plugin::interposer {

bool reserve_batch_scratch(const std::vector<PendingCollective>& calls,
                           const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard,
                           std::vector<char*>& regions, std::vector<ScratchOutcome>& outcomes) {
  regions.assign(calls.size(), nullptr);
  outcomes.assign(calls.size(), ScratchOutcome::Served);
  const std::size_t max_bytes =
      std::size_t(std::max<int64_t>(0, interposer_config().scratch_max_bytes));
  std::vector<std::pair<CommState*, std::size_t>> totals;
  std::vector<std::size_t> offsets(calls.size(), 0);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0) continue;
    CommState* st = calls[i].state.get();
    auto it = std::find_if(totals.begin(), totals.end(), [&](auto& t) { return t.first == st; });
    if (it == totals.end()) it = totals.insert(totals.end(), {st, 0});
    offsets[i] = it->second;
    it->second += (needs[i] + 255) / 256 * 256;
  }
  // Needs are the same on every rank (the most any rank of the schedule needs), so are the
  // totals. A total above the capacity the ranks last agreed on is voted on (one 4-byte
  // allreduce on the communicator) whether or not this rank must allocate for it: if any
  // rank could not, every rank sends that communicator's calls of this batch to NCCL, and
  // the agreed capacity stays (a rank that grew meanwhile still votes next time, with its
  // peers).
  auto settle = [&](CommState* st, ScratchOutcome outcome) {
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i].state.get() == st) outcomes[i] = outcome;
  };
  auto fall_back = [&](CommState* st, const char* why) {
    TC_FALLBACK_ONCE("topocoll scratch %s: such calls go to NCCL (on every rank alike)", why);
    settle(st, ScratchOutcome::ToNccl);
  };
  std::vector<ReadyVote> votes;
  std::vector<std::pair<CommState*, std::size_t>> voted;  // per vote: its communicator and total
  std::vector<std::pair<CommState*, char*>> bases;
  for (auto& [st, total] : totals) {
    if (!st->scratch) throw std::logic_error("served communicator without scratch");
    if (st->calls_stopped.load()) continue;  // Released below: no scratch, no vote
    if (total > max_bytes) {
      fall_back(st, "above TOPOCOLL_SCRATCH_MAX_BYTES");
      continue;
    }
    device_guard.use(st->device);
    bool captured = false;
    for (const PendingCollective& c : calls)
      if (c.state.get() == st && stream_capturing(c.call.stream)) captured = true;
    char* base = static_cast<char*>(st->scratch->reserve(total, captured));
    if (!captured && !st->scratch->agreed_fits(total)) {
      // No vote inside a capture (the vote synchronises): there a failure stays an error.
      ReadyVote v;
      v.comm = st->comm;
      v.device = st->device;
      v.ready = base ? 1 : 0;
      v.abandon = &st->calls_stopped;
      v.cell = st->vote_cell.get();
      v.limit = WaitLimit::for_a_call(interposer_config().vote_timeout_s);
      v.what = "the topocoll scratch vote";
      votes.push_back(std::move(v));
      voted.push_back({st, total});
    } else if (!base) {
      TC_WARN("comm %p: cannot allocate %zu bytes of scratch", static_cast<void*>(st->comm), total);
      return false;
    }
    bases.push_back({st, base});
  }
  // While it waits, a communicator of the batch whose calls were stopped gets nothing more
  // (marked Released below): its release need not wait for the batch's other votes.
  agree_ready(votes, leave_stopped_communicators);
  for (std::size_t k = 0; k < votes.size(); ++k)
    if (votes[k].all_ready) voted[k].first->scratch->agree(voted[k].second);
  for (const ReadyVote& v : votes)
    if (!v.all_ready)
      for (auto& [st, base] : bases)
        if (st->comm == v.comm) {
          if (!v.error.empty()) TC_WARN("comm %p: scratch vote: %s", static_cast<void*>(st->comm), v.error.c_str());
          // Abandoned: nothing more goes to a communicator whose calls were stopped, not even
          // to NCCL, whose runtime connect could wait for the very peer that hung.
          if (v.abandoned) {
            settle(st, ScratchOutcome::Released);
          } else if (!v.known) {
            // Its peers may serve the batch while this rank cannot know: neither serving nor
            // NCCL is safe. Nothing is issued, now or later (serve_collective returns the error).
            st->out_of_step = ncclSystemError;
            settle(st, ScratchOutcome::Failed);
          } else {
            fall_back(st, "allocation failed on some rank");
          }
          base = nullptr;
        }
  for (auto& [st, base] : bases)
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (needs[i] > 0 && calls[i].state.get() == st && base) regions[i] = base + offsets[i];
  // A communicator whose calls were stopped gets nothing more, voted on or not (its vote
  // may have ended just before): its release may have stopped waiting for this thread
  // (leave_stopped_communicators), here or in an earlier part of the batch, and a destroy
  // past its bound frees it next.
  for (std::size_t i = 0; i < calls.size(); ++i)
    if (calls[i].state->calls_stopped.load()) outcomes[i] = ScratchOutcome::Released;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (needs[i] == 0 || outcomes[i] != ScratchOutcome::Served) continue;
    device_guard.use(calls[i].state->device);
    calls[i].state->scratch->order_after_previous(calls[i].call.stream);
  }
  return true;
}

ncclResult_t report_released(const std::vector<PendingCollective>& calls,
                             const std::vector<ScratchOutcome>& outcomes) {
  ncclResult_t r = ncclSuccess;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (outcomes[i] == ScratchOutcome::Failed) {
      TC_WARN("comm %p: this rank could not read back the vote on growing its scratch; its call of %zu "
              "elements was not run, and the communicator is out of step with its peers (they may run it): "
              "ncclCommGetAsyncError reports ncclSystemError for it, abort it",
              static_cast<void*>(calls[i].state->comm), calls[i].call.count);
      if (r == ncclSuccess) r = ncclSystemError;
      continue;
    }
    if (outcomes[i] != ScratchOutcome::Released) continue;
    TC_WARN("comm %p: %s before its call of %zu elements was issued; the collective was not run",
            static_cast<void*>(calls[i].state->comm), stopped_by(*calls[i].state), calls[i].call.count);
    r = ncclInvalidUsage;
  }
  return r;
}

void mark_batch_scratch_used(const std::vector<PendingCollective>& calls,
                             const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard) {
  std::vector<CommState*> done;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    CommState* st = calls[i].state.get();
    if (needs[i] == 0 || std::find(done.begin(), done.end(), st) != done.end()) continue;
    done.push_back(st);
    std::vector<cudaStream_t> streams;
    for (std::size_t k = 0; k < calls.size(); ++k)
      if (needs[k] > 0 && calls[k].state.get() == st) streams.push_back(calls[k].call.stream);
    device_guard.use(st->device);
    st->scratch->mark_used(streams);
  }
}

}  // namespace topocoll::plugin::interposer
