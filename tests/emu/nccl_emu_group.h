// ncclGroupStart/ncclGroupEnd for the emulation (per thread, nestable). Outside a group an
// op runs at once; inside, ops queue until the outermost ncclGroupEnd, which posts every
// op's sends (in queue order), then completes every op's receives and local work (in queue
// order). The work goes through the stream (topocoll::emu::enqueue), so under CUDA graph
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
ncclResult_t group_end();
// Ends the group without running its ops (what ncclGroupSimulateEnd does to them).
ncclResult_t group_discard();

}  // namespace topocoll::emu
