// ncclGroupStart/ncclGroupEnd for the emulation (per thread, nestable). Outside a group an
// op runs at once; inside, ops queue until the outermost ncclGroupEnd, which posts every
// op's sends (in queue order), then completes every op's receives and local work (in queue
// order). An op that fails while enqueued in a group fails the group (group_error_check):
// its outermost end returns that error and runs none of the group's ops, as NCCL's. The
// work goes through the stream (topocoll::emu::enqueue), so under CUDA graph
// capture the whole group is recorded as one piece of work and runs at each replay.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <optional>

#include "tests/emu/nccl_emu_exchange.h"

namespace topocoll::emu {

// `stream` is empty for ops that run on no stream (ncclCommSplit, ncclCommShrink).
ncclResult_t submit(std::shared_ptr<Exchange> op, std::optional<cudaStream_t> stream);
ncclResult_t group_start();
// `r`, which an enqueued op returned; inside a group a failure is also the group's (the last
// one wins, as NCCL's ncclGroupError).
ncclResult_t group_error_check(ncclResult_t r);
ncclResult_t group_end();
// Ends the group without launching its ops on streams (what ncclGroupSimulateEnd does to
// them) but making its splits and shrinks, as NCCL does; a failed group's error all the same.
// `sim_info_initialized`: the simInfo came from NCCL_SIM_INFO_INITIALIZER (NCCL fails the
// outermost end otherwise, launching nothing).
ncclResult_t group_discard(bool sim_info_initialized);

}  // namespace topocoll::emu
