// What keeps a destroy or abort on one thread from freeing a communicator that a served call
// on another thread is still using. NCCL forbids releasing a communicator while another
// thread is inside a call on it, but its calls return at once; a served call can stay inside
// for long: when its scratch grows it waits on the host for every rank's vote (rank_exchange.h),
// and a peer that hung keeps it waiting until the abort. PyTorch's watchdog calls
// ncclCommAbort from its own thread exactly then.
//
// So a release first marks the communicator and waits for the served calls inside it to
// leave. A call not yet started when it sees the mark (one queued in another thread's open
// group) is not run: ncclInvalidUsage. An abort also ends the vote's wait, and the calls
// that waited issue nothing more (ncclInvalidUsage): not even NCCL's own collective, whose
// runtime connect could wait for the very peer that hung. A destroy lets the vote finish,
// as its peers are expected to be alive. A batch spanning several communicators leaves an
// aborted one while it waits for a vote, not when the batch's other votes are done.
// The first nccl-topo-ring call makes the
// topology-ordered split, which waits for every rank too: after an abort began meanwhile the
// call issues nothing, and the split goes down with the user's communicator, also when it
// is made only after the release's bound passed. The wait is bounded: a call stuck inside NCCL
// itself (connecting to a peer that hung) leaves only when NCCL's abort sets its flag, so
// past the bound the release goes on with a WARN, and from there it is NCCL's own race of
// an abort against a call on another thread. A destroy that reaches its bound first stops
// the calls as an abort does (CommState::calls_stopped): one waiting in a vote behind peers
// that never vote leaves it, rather than polling a communicator NCCL is about to free, and
// one whose vote ends after the bound issues nothing on it.
//
// A revoke (ncclCommRevoke, or ncclCommShrink with NCCL_SHRINK_ABORT) stops the calls too,
// before NCCL ends the communicator's kernels: a vote's allreduce ended that way reads back
// this rank's own vote, which must not count as its peers'. It waits for no call: NCCL
// frees nothing there. The communicator's later served calls are not run (NCCL refuses a
// revoked communicator's collectives too); after a shrink with NCCL_SHRINK_ABORT, which
// leaves it usable in NCCL, they go to NCCL (leave_to_nccl_for_shrink_abort).
//
// Counted are the calls that run topocoll's schedules or permutations (run_pending). A
// call forwarded straight to NCCL (on the user's or the topology-ordered communicator) is
// an NCCL enqueue that returns at once, guarded no more than NCCL guards its own.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "plugin/interposer/comm_state.h"
#include "plugin/interposer/thread_group.h"

namespace topocoll::plugin::interposer {

// Counts the calling thread as inside each distinct communicator of a batch of served
// calls for the scope's life, holding each one's state (calls dropped from the batch meanwhile
// must not take it away). Entering before looking at `releasing` (both sequentially
// consistent) means a release either sees the call inside or the call sees the release.
class ServedCallsInside {
 public:
  explicit ServedCallsInside(const std::vector<PendingCollective>& calls);
  ~ServedCallsInside();
  ServedCallsInside(const ServedCallsInside&) = delete;
  ServedCallsInside& operator=(const ServedCallsInside&) = delete;

  // The innermost scope of the calling thread, or null.
  static ServedCallsInside* of_this_thread();
  // Stops counting as inside every communicator whose calls were stopped: the batch issues
  // nothing more on them.
  void leave_stopped();

 private:
  std::vector<std::shared_ptr<CommState>> entered_;
  ServedCallsInside* outer_ = nullptr;
};

// The calling thread's batch issues nothing more on the communicators whose calls were
// stopped (their calls not issued yet are Released: batch_scratch.h): their releases go on
// without waiting for the rest of the batch, whose other communicators may keep it waiting
// (a vote behind a peer that hung). Called while the batch waits for a vote.
void leave_stopped_communicators();

// Whether `st` is being destroyed or aborted; a call that sees it must not touch st.comm.
inline bool releasing(const CommState& st) { return st.releasing.load(); }

// What stopped st's calls, for messages: "aborted by another thread", "destroyed by
// another thread", or the revoke.
const char* stopped_by(const CommState& st);

// Which calls drop_released_calls takes out: before a call starts, those of any
// communicator being released or whose calls were stopped (revoked); once it has waited
// for its peers (inside the fence), those whose calls were stopped meanwhile, or whose
// release went on without waiting for them (a destroy otherwise lets a call that is inside
// finish).
enum class DropCalls : char { OfReleasingOrStopped, OfStopped };

// Takes out of `calls` those `which` names, with a WARN each naming the communicator, what
// stopped it, the collective and `when` that came; they are not run. ncclInvalidUsage when
// any, else ncclSuccess.
ncclResult_t drop_released_calls(std::vector<PendingCollective>& calls, DropCalls which, const char* when);

// Takes the calls of communicators marked out of step (CommState::out_of_step) out of
// `calls`, with a WARN each: queued in a group before the mark, or whose split vote just set
// it. ncclSystemError when any, else ncclSuccess.
ncclResult_t drop_out_of_step_calls(std::vector<PendingCollective>& calls);

// A served call failed partway (a kernel launch, a copy, an NCCL step of its schedule, a
// block permutation): some of its steps may be out, and its peers run all of theirs. NCCL's
// own enqueue never leaves a call half issued (enqueue.cc ncclEnqueueCheck fails before
// anything is enqueued), so nothing would tell the user that the communicator's next
// operation meets leftover steps: st is marked out of step (ncclSystemError, the first
// mark kept), with one WARN naming `what` failed.
void mark_out_of_step(CommState& st, const char* what) noexcept;

// The topology-ordered communicator a split just made becomes st's (publish_ring_comm). The
// split can end after a release's bound passed (the release then took no ring_comm to
// destroy): then it is released here, as the release would have (aborted for an abort).
void adopt_ring_comm(CommState& st, ncclComm_t made);

// What a release takes (after its fence) to destroy or abort itself: st's topology-ordered
// communicator, or null. From then on a split that ends adopts nothing (adopt_ring_comm).
ncclComm_t take_ring_comm_for_release(CommState& st);

// Ends st's topology-ordered communicator `ring` with its user's: aborted for an abort, and
// also for a destroy when the ring failed (an asynchronous error) or was revoked. NCCL 2.28's
// ncclCommDestroy returns a failed communicator's error from inside its own group
// (init.cc: ncclGroupStartInternal, then NCCLCHECK(ncclCommEnsureReady)), so the thread's group
// depth stays raised: the user's own destroy that follows would be queued in a group that
// never ends, and the thread's every later NCCL call with it.
// A revoked ring that shares the user's abort flag (`shares_user_abort_flag`: splitShare,
// init.cc ncclCommInitChildComm) is not aborted at a destroy: the abort would stop the
// user's kernels that destroy is to flush. It is destroyed (its revoke set its finalize, so
// NCCL's destroy neither flushes it nor touches the flag), or, reporting an error, returned
// for the caller to abort once the user's release is done. Returns null otherwise.
ncclComm_t release_ring_comm(const CommState& st, ncclComm_t ring, bool abort, bool shares_user_abort_flag = false);

// Marks `st` as releasing (and aborting, for an abort: its calls stop at once) and waits
// up to `bound` for the served calls inside it to leave. At the bound it stops them and
// waits up to `stopped_leave` more for those waiting in a vote to leave it. False (with a
// WARN naming the communicator) when some are still inside then.
bool fence_served_calls(CommState& st, bool abort, std::chrono::milliseconds bound,
                        std::chrono::milliseconds stopped_leave);

// Stops st's calls before NCCL revokes it (or a shrink aborts its operations): see above.
void stop_calls_for_revoke(CommState& st);

// How long a destroy or abort waits for served calls on other threads, and then for those
// it stopped to leave their votes (they see it within a poll: 100 us to 10 ms).
inline constexpr std::chrono::milliseconds kReleaseWaitsForCalls{5000};
inline constexpr std::chrono::milliseconds kStoppedCallsLeave{1000};

}  // namespace topocoll::plugin::interposer
