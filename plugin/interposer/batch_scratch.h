// Device scratch for one batch of served calls (the calls of one ncclGroupEnd, or one call):
// a region per call carved from its communicator's DeviceScratch, ordered after the previous
// batch's uses, and the uses recorded afterwards.
#pragma once

#include <cstddef>
#include <vector>

#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/thread_group.h"

namespace topocoll::plugin::interposer {

// Where a call of the batch goes once its scratch is settled.
enum class ScratchOutcome : char {
  Served,    // topocoll runs it in its region
  ToNccl,    // NCCL runs it instead, decided alike on every rank of its communicator
  Released,  // its communicator is being aborted (the vote may have waited): nothing is issued
  Failed,    // this rank voted to grow and could not read the outcome back: nothing is issued,
             // and its communicator is marked out of step (CommState::out_of_step)
};

// Call i gets needs[i] bytes (none when 0), a region of its communicator's scratch of its
// own (calls of one communicator in one batch run at the same time, so they cannot share),
// ordered after the previous batch's uses. needs[i] must be the same on every rank (the
// most any rank needs). outcomes[i] is ToNccl when its communicator's total is above
// TOPOCOLL_SCRATCH_MAX_BYTES or growing the scratch failed on some rank (a vote, one 4-byte
// allreduce, only when the scratch grows), Released when an abort from another thread has
// begun (and ended the vote's wait: release_fence.h). False (WARNed) only when an allocation for a
// call being captured into a CUDA graph fails (no vote is possible there).
bool reserve_batch_scratch(const std::vector<PendingCollective>& calls,
                           const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard,
                           std::vector<char*>& regions, std::vector<ScratchOutcome>& outcomes);

// Warns about the batch's Released and Failed calls; ncclInvalidUsage when any was
// Released, else ncclSystemError when any Failed.
ncclResult_t report_released(const std::vector<PendingCollective>& calls,
                             const std::vector<ScratchOutcome>& outcomes);

// After a batch: every communicator whose scratch a call used records the calls' streams.
void mark_batch_scratch_used(const std::vector<PendingCollective>& calls,
                             const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard);

}  // namespace topocoll::plugin::interposer
