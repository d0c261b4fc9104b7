// What keeps a destroy or abort on one thread from freeing a communicator that a served call
// on another thread is still using. NCCL forbids releasing a communicator while another
// thread is inside a call on it, but its calls return at once; a served call can stay inside
// for long: when its scratch grows it waits on the host for every rank's vote (rank_exchange.h),
// and a peer that hung keeps it waiting until the abort. PyTorch's watchdog calls
// ncclCommAbort from its own thread exactly then.
//
// So a release first marks the communicator as releasing and waits for the served calls
// inside it to leave: the vote's wait gives up when it sees the mark, and a call that sees
// it issues nothing more on that communicator and returns ncclInvalidUsage. The wait is
// bounded (a call stuck inside NCCL itself, say connecting to a dead peer, leaves only when
// NCCL's abort ends it): past the bound the release goes on, with a WARN, as NCCL would.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "plugin/interposer/comm_state.h"

namespace topocoll::plugin::interposer {

// Counts the calling thread as inside each distinct communicator of a batch of served
// calls for the scope's life. Entering before looking at `releasing` (both sequentially
// consistent) means a release either sees the call inside or the call sees the release.
class ServedCallsInside {
 public:
  explicit ServedCallsInside(const std::vector<std::shared_ptr<CommState>>& states);
  ~ServedCallsInside();
  ServedCallsInside(const ServedCallsInside&) = delete;
  ServedCallsInside& operator=(const ServedCallsInside&) = delete;

 private:
  std::vector<CommState*> entered_;
};

// Whether `st` is being destroyed or aborted; a call that sees it must not touch st.comm.
inline bool releasing(const CommState& st) { return st.releasing.load(); }

// Marks `st` as releasing and waits up to `bound` for the served calls inside it to leave.
// False (with a WARN naming the communicator) when some are still inside at the bound.
bool fence_served_calls(CommState& st, std::chrono::milliseconds bound);

// How long a destroy or abort waits for served calls on other threads.
inline constexpr std::chrono::milliseconds kReleaseWaitsForCalls{5000};

}  // namespace topocoll::plugin::interposer
