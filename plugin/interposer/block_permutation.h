// Blocks of a reduce-scatter input or an allgather output moved between the user's rank
// order and the topology-ordered communicator's (ring_comm.h).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace topocoll::plugin::interposer {

// Moves `nranks` blocks of `block` bytes between the user's rank order and ring_comm's:
// to_ring: ring block j = user block ring_order[j] (before a reduce-scatter);
// otherwise: user block ring_order[j] = ring block j (after an allgather). Runs of
// consecutive ranks are one range each, all copied by the batched copy kernel
// (kernels/copy_ranges_cuda.h): one launch per kMaxCopyRangesPerLaunch runs, not one
// cudaMemcpyAsync per run.
cudaError_t permute_blocks(const std::vector<int>& ring_order, bool to_ring, char* user, char* ring,
                           std::size_t block, cudaStream_t stream);

}  // namespace topocoll::plugin::interposer
