// The init-time exchange of RankIdentity records (rank_identity.h) over NCCL itself: one
// pncclAllGather of sizeof(RankIdentity) bytes per communicator, on a temporary device
// buffer allocated and freed on a temporary stream of the communicator's device, then a
// stream synchronisation (init is not on the hot path and is never captured). Communicators
// created together inside one user group are exchanged in one NCCL group, so one thread
// driving several of them cannot deadlock. GPU-only: NCCL collectives need device memory.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "plugin/interposer/rank_identity.h"

namespace topocoll::plugin::interposer {

// When a wait for the peers ends without them (default: never). Init sets one
// (TOPOCOLL_INIT_TIMEOUT_S), and so do the votes on a served call's path (scratch growth, the
// topology-ordered split made at first use; TOPOCOLL_VOTE_TIMEOUT_S): NCCL's own collective returns at once and only the GPU
// waits, so PyTorch's watchdog times it out; a call waiting on the host for a peer that
// never comes is invisible to the watchdog (its work is queued only when the call returns),
// and only this limit, an abort from another thread or NCCL's asynchronous error end it.
struct WaitLimit {
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::time_point::max();
  int64_t seconds = 0;  // what `at` was set from, for messages; 0: no limit
  const char* name = "the init's time limit";                        // for messages
  const char* setting = "TOPOCOLL_INIT_TIMEOUT_S";                     // the variable it came from
  const char* never_comes = "a peer whose NCCL init failed never joins";  // why peers may not
  // `seconds` from now; no limit when 0.
  static WaitLimit after(int64_t seconds);
  // The same for a vote on a served call's path.
  static WaitLimit for_a_call(int64_t seconds);
};

struct IdentityExchange {
  ncclComm_t comm = nullptr;
  int nranks = 0;
  int rank = 0;
  int device = -1;
  RankIdentity mine;
  std::vector<RankIdentity> all;  // filled on success, indexed by rank
  std::string error;              // set when the exchange failed or this rank did not join
  // Set when this rank could not prepare its record but joined with a "cannot serve" one
  // (mark_unserved): `all` is still filled, and the agreement falls back on every rank.
  std::string prepare_error;
  // Set when this rank's allgather was enqueued in a group NCCL completed: its peers may
  // then be waiting for it in the ready vote below, whatever it could read back.
  bool joined = false;
  WaitLimit limit;
  // Set when this rank stopped waiting for the allgather (`limit` passed, or NCCL reported
  // an asynchronous error on the communicator): `error` says which. The allgather stays
  // enqueued, so `joined` stays set: the ready vote still goes out, in step with the peers.
  bool gave_up = false;
};

// Every entry takes part: a rank must never skip a collective its peers run. A failure to
// create the stream or to copy the record still joins, with a "cannot serve" record (on
// the per-thread default stream if need be), so all ranks fall back together. The only
// way one can stay out is having no device memory at all (the allocation of 128 x nranks
// bytes fails, or the device cannot be selected) on the device of a communicator NCCL just
// created, or NCCL refusing the allgather; `joined` then stays false and `error` says so:
// the peers wait for it up to their init limit, and its own next call on the communicator
// would meet their allgather in NCCL, so the caller marks the communicator failed.
// Every other failure is agreed on after the exchange (rank_identity.h).
void exchange_identities(std::span<IdentityExchange> batch);

// The CUDA calls the exchange makes, replaceable so that tests on a machine without a GPU
// can reach every failure path. Defaults: the CUDA runtime's functions.
struct ExchangeCudaCalls {
  cudaError_t (*get_device)(int*);
  // Stream-ordered (cudaMallocAsync, cudaFreeAsync): no free waits for the whole device.
  cudaError_t (*malloc_async)(void**, std::size_t, cudaStream_t);
  cudaError_t (*free_async)(void*, cudaStream_t);
  cudaError_t (*stream_create)(cudaStream_t*, unsigned int);
  cudaError_t (*stream_destroy)(cudaStream_t);
  cudaError_t (*stream_synchronize)(cudaStream_t);
  cudaError_t (*memcpy_async)(void*, const void*, std::size_t, cudaMemcpyKind, cudaStream_t);
  cudaError_t (*memset_async)(void*, int, std::size_t, cudaStream_t);
  cudaError_t (*stream_query)(cudaStream_t);
};
ExchangeCudaCalls& exchange_cuda_calls();

// The second, 4-byte agreement after each rank registered the agreed state locally: a
// failure there (the gathered records not read back, an allocation) is local to one rank,
// and a rank left unserved would run NCCL's collectives while its peers run topocoll's
// schedules. Every rank that joined the exchange votes `ready` (0 on any local failure);
// one pncclAllReduce(ncclInt32, ncclMin) per communicator, all in one NCCL group; served
// only when the minimum is 1. Same joining rule as the exchange: a rank that fails to
// prepare its vote still joins with 0; only a rank with no device memory at all stays
// out (`joined` false, `error` says why), unless the vote runs in a kept `cell`.
//
// The vote's result is waited for by polling, not in CUDA: a peer that hung keeps the
// allreduce pending until NCCL's abort ends its kernel, and that abort comes from another
// thread (PyTorch's watchdog), which first waits for this call to leave (comm_release).
// `abandon`, when set while the vote waits or before its result is read, ends it: all_ready
// stays false (a revoke ends the allreduce early, with this rank's own vote as its result). So do
// NCCL's asynchronous error on the communicator and `limit`. The exchange's allgather is
// waited for the same way.
// Device memory a served communicator keeps for the votes on its calls' path (scratch
// growth, the topology-ordered split), with the stream they run on: such a vote allocates
// nothing, so a rank short of device memory (where scratch growth fails, the 4 bytes of a
// new allocation may fail too) still joins the vote its peers run. One that stayed out
// would leave them waiting, and its next call on the communicator would meet their vote's
// allreduce in NCCL. Freed on its own stream, behind a vote still pending there (an
// abandoned one ends with NCCL's abort, which runs before the communicator's state goes).
class VoteCell {
 public:
  // Throws std::runtime_error naming the CUDA error; the caller made `device` current.
  static std::unique_ptr<VoteCell> create(int device);
  ~VoteCell();
  VoteCell(const VoteCell&) = delete;
  VoteCell& operator=(const VoteCell&) = delete;
  void* buffer() const { return buffer_; }
  cudaStream_t stream() const { return stream_; }

 private:
  VoteCell() = default;
  int device_ = -1;
  void* buffer_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

struct ReadyVote {
  ncclComm_t comm = nullptr;
  int device = -1;
  int ready = 0;           // this rank's vote
  // The communicator's kept vote memory and stream (null: allocated for this vote; the
  // init's vote, before the communicator has one).
  const VoteCell* cell = nullptr;
  const std::atomic<bool>* abandon = nullptr;  // the communicator's calls were stopped
  bool all_ready = false;  // out: every rank voted 1 and the minimum was read back
  WaitLimit limit;
  const char* what = "the topocoll ready vote";  // for messages
  bool abandoned = false;  // out: `abandon` was set before the result was read
  // out: `limit` passed, or NCCL reported an asynchronous error on the communicator, before
  // the result arrived (`error` says which); all_ready stays false.
  bool gave_up = false;
  // out: this rank's allreduce went out in a group NCCL completed, so its peers' votes can
  // complete. False only without device memory for the vote or when NCCL refused it: then
  // the communicator is out of step with its peers.
  bool joined = false;
  // out: all_ready is the communicator's answer, the same on every rank: the minimum was
  // read back, or this rank voted 0 (then the minimum is 0 whatever its peers voted).
  // False after a vote this rank voted 1 in but could not read back (a CUDA error), or
  // left (abandoned, gave_up): its peers may have served while it cannot know.
  bool known = false;
  std::string error;       // out: why this rank could not vote or read the result
};
// `while_waiting` (when set) runs on this thread at every poll while some vote still waits.
void agree_ready(std::span<ReadyVote> batch, const std::function<void()>& while_waiting = {});

}  // namespace topocoll::plugin::interposer
