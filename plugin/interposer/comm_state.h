// What the interposer knows about one NCCL communicator, and the registry that finds it
// from an ncclComm_t on every collective call.
//
// Every communicator created through the interposer gets an entry (served or not: a split
// of an unserved non-blocking parent must know it was non-blocking). The hot path first
// reads one relaxed atomic (any communicator served at all?), so with no topology the
// forwarding cost is a load and a branch; otherwise a per-thread cache of recent lookups,
// valid while the registry's generation is unchanged (a shared lock on every call would make
// every thread that issues collectives write one shared cache line).
#pragma once

#include <nccl.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "plugin/interposer/call_route_cache.h"
#include "plugin/interposer/comm_config.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::exec {
class OverlapLane;
class StepTimeline;
}  // namespace topocoll::exec

namespace topocoll::plugin::interposer {

class DeviceScratch;
class VoteCell;

struct CommState {
  ncclComm_t comm = nullptr;
  int rank = 0;
  int nranks = 1;
  int device = -1;        // CUDA device of the communicator
  bool blocking = true;   // config blocking != 0
  CommConfigCopy config;  // the user's config: the topology-ordered split gets it too
  // Every rank agreed: topocoll may take this communicator's calls. Flipped only under the
  // registry's lock (set_served, set_unserved); read by calls without it.
  std::atomic<bool> served{false};
  std::string fallback_reason;  // why not served (logged once at init)

  std::shared_ptr<const topo::Topology> topology;
  sched::Placement placement;
  // The lowest compute capability of its GPUs (rank_identity.h): below 90 its fp8
  // reductions go to NCCL, which refuses them (NCCL 2.28 src/enqueue.cc, taskAppend).
  int min_compute_capability = 0;
  CallRouteCache routes;

  // Device scratch grown on demand, freed with the communicator.
  std::unique_ptr<DeviceScratch> scratch;
  // The memory and stream of the votes on its calls' path (rank_exchange.h): kept, so a
  // rank short of memory still joins them.
  std::unique_ptr<VoteCell> vote_cell;
  // The second stream pipelined steps overlap their reduces on (exec/nccl_backend.h); null:
  // no overlap.
  std::unique_ptr<exec::OverlapLane> overlap_lane;
  // TOPOCOLL_STEP_TIMES: the schedule collectives' step times (step_times_log.h); else null.
  std::unique_ptr<exec::StepTimeline> step_timeline;
  // Lazily split copy of this communicator in topology ring order (nccl-topo-ring); created
  // and used by the thread that drives the communicator, as NCCL requires.
  // Atomic: an abort on another thread clears it while a call may read it.
  std::atomic<ncclComm_t> ring_comm{nullptr};
  // A split not used whose destroy failed (ring_comm.cpp release_unadopted_split): it shares
  // this communicator's abort flag, so it is aborted only with this communicator, at its
  // release, just before NCCL's own destroy or abort.
  std::atomic<ncclComm_t> unused_split{nullptr};
  // A release has taken ring_comm to destroy it: a split ending later is not adopted
  // (release_fence.h, adopt_ring_comm).
  std::atomic<bool> ring_comm_taken{false};
  // No split will be used; nccl-topo-ring calls run on the user's communicator: the split
  // failed, TOPOCOLL_RING_COMM=off, or the ring order is the user's own rank order (then
  // NCCL's ring on the user's communicator is that ring already).
  bool ring_comm_failed = false;
  // Not ncclSuccess once topocoll has left this rank out of step with its peers on the
  // communicator, or cannot know that it is not: its init stopped waiting for them
  // (TOPOCOLL_INIT_TIMEOUT_S, or NCCL's own error) with its collective still enqueued, it
  // could not join an init collective they run, a vote's outcome could not be read back
  // after this rank voted yes, or a served call failed after it may have issued steps its
  // peers match (mark_out_of_step). ncclCommGetAsyncError reports it, which NCCL 2.28's enqueue
  // asks first (through its PLT, so the interposer's answers): NCCL refuses the
  // communicator's next operations; a served communicator's calls return it before NCCL
  // sees them (serve_collective). The user (PyTorch's watchdog) then aborts it.
  std::atomic<ncclResult_t> out_of_step{ncclSuccess};
  // ring_order[j]: the user's rank that is rank j of ring_comm. Reduce-scatter and
  // allgather deliver blocks in ring_comm's rank order, so when it is not the identity
  // (ring_permutes, set with it) their blocks are permuted through scratch (interposer.cpp,
  // run_ring_calls).
  std::vector<int> ring_order;
  bool ring_permutes = false;
  // Buffers the user registered on this communicator (ncclCommRegister), mirrored on
  // ring_comm so NCCL's zero-copy paths see them there too (buffer_registration.h).
  struct Registration {
    void* buff = nullptr;
    std::size_t size = 0;
    void* handle = nullptr;       // the user's handle, from the user's communicator
    void* ring_handle = nullptr;  // the same buffer's on ring_comm, null if none
  };
  std::mutex registrations_mutex;
  std::vector<Registration> registrations;

  // A destroy or abort has begun (and which): served calls inside, counted, must leave
  // before NCCL's runs (release_fence.h).
  std::atomic<bool> releasing{false};
  std::atomic<bool> aborting{false};
  std::atomic<int> calls_inside{0};
  // The calls inside issue nothing more on it, the votes they wait in end
  // (ReadyVote::abandon), and later calls are not run: set as an abort begins; by a revoke
  // (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT), as NCCL then ends the
  // communicator's kernels and a vote's allreduce would read back this rank's own vote; and
  // by a destroy that stopped waiting for the calls at its bound, as it frees the
  // communicator next. Never cleared (release_fence.h).
  std::atomic<bool> calls_stopped{false};
  std::atomic<bool> revoked{false};  // what stopped them was a revoke
  // NCCL took ncclCommFinalize for it: NCCL refuses a revoke from now on (init.cc
  // ncclCommRevoke), so a revoke stops nothing here either.
  std::atomic<bool> finalize_called{false};

  // One INFO line per decision bucket: bit b of word c = collective c, size 2^b bytes.
  std::array<std::atomic<uint64_t>, 4> logged_buckets{};

  CommState();
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;
};

class CommRegistry {
 public:
  static CommRegistry& instance();

  // Replaces any earlier entry for the same handle (NCCL may reuse a freed address).
  void insert(std::shared_ptr<CommState> state);
  // Marks a registered communicator served: no allocation, so a rank whose peers agreed to
  // serve it cannot fail here and be left out (init registers every communicator unserved
  // before its collectives and only flips it after the vote).
  void set_served(CommState& state) noexcept;
  // From now on its calls go to NCCL unchanged (a shrink with NCCL_SHRINK_ABORT: NCCL keeps
  // the parent usable, topocoll's own state of it is not; decided alike on every rank that
  // shrinks). Calls already inside keep their state.
  void set_unserved(CommState& state) noexcept;
  // Null when the communicator was not created through the interposer. For the thread that
  // creates and releases the communicator (init, finalize, tests); calls take share().
  CommState* find(ncclComm_t comm) const;
  // The state with shared ownership: a call holds it while it runs, so a destroy or abort
  // from another thread meanwhile only takes it out of the registry.
  std::shared_ptr<CommState> share(ncclComm_t comm) const;
  std::shared_ptr<CommState> remove(ncclComm_t comm);
  // True when at least one registered communicator is served (hot-path gate).
  bool any_served() const { return served_count_.load(std::memory_order_relaxed) > 0; }
  std::size_t size() const;
  // Changes with every insert and remove: a lookup made at an unchanged generation is valid.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<ncclComm_t, std::shared_ptr<CommState>> states_;
  std::atomic<int> served_count_{0};
  std::atomic<uint64_t> generation_{1};
};

// The state of a served communicator, or null (not ours, not served): the hot-path check.
// A thread usually drives a few communicators (PyTorch: the default group and subgroups),
// so it remembers its last few answers; any insert/remove invalidates them all. The
// answer is a shared reference (the cache holds weak ones, so a released communicator's
// state is not kept alive by threads that stopped calling): an abort from another thread
// while the call runs cannot free what the call uses.
inline std::shared_ptr<CommState> served_state(ncclComm_t comm) {
  CommRegistry& registry = CommRegistry::instance();
  if (!registry.any_served()) return nullptr;
  struct Entry {
    ncclComm_t comm = nullptr;
    std::weak_ptr<CommState> state;  // expired: not served (or released)
  };
  struct Cache {
    uint64_t generation = 0;  // 0: nothing cached (the registry starts at 1)
    std::array<Entry, 4> entries{};
    unsigned next = 0;
  };
  thread_local Cache cache;
  const uint64_t generation = registry.generation();
  if (cache.generation != generation) {
    cache = Cache{};
    cache.generation = generation;
  } else {
    for (const Entry& e : cache.entries)
      if (e.comm == comm && comm) return e.state.lock();
  }
  std::shared_ptr<CommState> state = registry.share(comm);
  if (state && !state->served) state = nullptr;
  cache.entries[cache.next++ % cache.entries.size()] = {comm, state};
  return state;
}

}  // namespace topocoll::plugin::interposer
