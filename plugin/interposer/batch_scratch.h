// Device scratch for one batch of served calls (the calls of one ncclGroupEnd, or one call):
// a region per call carved from its communicator's DeviceScratch, ordered after the previous
// batch's uses, and the uses recorded afterwards.
#pragma once

#include <cstddef>
#include <vector>

#include "plugin/interposer/device_guard.h"
#include "plugin/interposer/thread_group.h"

namespace topocoll::plugin::interposer {

// Call i gets needs[i] bytes (none when 0), a region of its communicator's scratch of its
// own (calls of one communicator in one batch run at the same time, so they cannot share),
// ordered after the previous batch's uses. Null regions and false when an allocation fails
// (WARNed).
bool reserve_batch_scratch(const std::vector<PendingCollective>& calls,
                           const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard,
                           std::vector<char*>& regions);

// After a batch: every communicator whose scratch a call used records the calls' streams.
void mark_batch_scratch_used(const std::vector<PendingCollective>& calls,
                             const std::vector<std::size_t>& needs, CurrentDeviceGuard& device_guard);

}  // namespace topocoll::plugin::interposer
