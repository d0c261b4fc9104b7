#include "plugin/interposer/block_permutation.h"

#include "kernels/copy_ranges_cuda.h"

namespace topocoll::plugin::interposer {

cudaError_t permute_blocks(const std::vector<int>& ring_order, bool to_ring, char* user, char* ring,
                           std::size_t block, cudaStream_t stream) {
  const std::size_t n = ring_order.size();
  std::vector<kernels::CopyRange> ranges;
  for (std::size_t j = 0; j < n;) {
    std::size_t run = 1;
    while (j + run < n && ring_order[j + run] == ring_order[j] + int(run)) ++run;
    char* u = user + std::size_t(ring_order[j]) * block;
    char* r = ring + j * block;
    ranges.push_back({to_ring ? r : u, to_ring ? u : r, run * block});
    j += run;
  }
  return kernels::copy_ranges_cuda(ranges.data(), int(ranges.size()), stream);
}

}  // namespace topocoll::plugin::interposer
