// Two-level allreduce over equal-size groups of ranks (NAP packages, or multi-GPU hosts):
//   1. reduce-scatter inside each group, direct on the crossbar (sched/fc_direct.h): local
//      rank l of every group ends with shard l of the group's partial sum;
//   2. allreduce of shard l across the groups, among the ranks with local index l, along
//      each torus dimension in turn (NAP: "local, then vertical, then horizontal"; ring per
//      dimension as in the paper, or HD across hosts for BiGraph with multi-GPU servers);
//      the last dimension finalizes;
//   3. allgather inside each group, direct.
// Every shard element is reduced in the same order on all ranks, so results are bitwise
// identical. Per-dimension full allreduces follow the paper. With ring across groups,
// `reduce_scatter_first` instead runs the ring reduce-scatters of all dimensions first
// (each dimension on the block the previous one left) and then the allgathers in reverse
// order: the same steps, but dimension d moves only 1/(len_0...len_{d-1}) of the shard.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sched/schedule.h"

namespace topocoll::sched {

enum class InterGroupAlgo : uint8_t { Ring, HalvingDoubling };

struct HierParams {
  // Ranks per group; must divide nranks. Positions [g*group_size, (g+1)*group_size) of the
  // order form group g, so the order fixes both the grouping and the group order (ring
  // order or HD virtual rank of each group along a dimension).
  int group_size = 1;
  InterGroupAlgo inter = InterGroupAlgo::Ring;
  // Groups arranged as a torus, dimension 0 varying fastest in the group index; the
  // product must equal nranks / group_size. Empty: one dimension of all groups.
  std::vector<int> torus_dims;
  // Ring only: reduce-scatter along every dimension, then allgather back (see above).
  bool reduce_scatter_first = false;
};

// Throws std::invalid_argument naming the bad parameter.
Schedule hierarchical_allreduce(int nranks, int64_t count, const HierParams& params,
                                std::span<const int> order = {});

}  // namespace topocoll::sched
