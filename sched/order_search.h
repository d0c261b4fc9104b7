// The rank-order search against a pattern (sched/pattern_load.h), for shapes the EFLOPS
// closed form does not cover: a greedy construction, then pairwise swaps evaluated
// incrementally. The swaps minimise a smooth surrogate, the sum over steps and links of
// weight_s * load^4, whose steepness puts the worst load first; the step weight
// (1 + bytes_s / max bytes) prefers relieving the steps that move the most data, which is
// where intra-host (free fabric) pairs end up. The exact worst load is measured at the end.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// Above this many ranks the search would cost more at plan time than it saves: the seeds
// are evaluated, nothing is searched.
inline constexpr int kMaxSearchRanks = 8192;

// The swap budget when none is given: 64 per rank, at most 400,000.
int64_t default_swap_budget(int nranks);

// Minimises the worst per-step link load, then the byte-weighted per-step loads, then hops.
// `max_swaps` bounds the improvement phase (0 = default_swap_budget).
RankOrder search_order(const topo::Topology& topology, const Placement& placement,
                       const Pattern& pattern, int64_t max_swaps = 0);
// The same, with orders the caller knows as extra seeds beside the identity and the greedy
// construction; the swaps start from the best seed.
RankOrder search_order_from(const topo::Topology& topology, const Placement& placement,
                            const Pattern& pattern, std::vector<std::vector<int>> seeds,
                            int64_t max_swaps = 0);

// Host-structured swaps for an order whose virtual ranks [h*G, h*G+G) all sit on one host
// (G = 2^log2_gpus): two GPUs of one host trade local indices, or two whole hosts trade
// their blocks. Both keep every pair of the first log2_gpus HD steps inside a host, so only
// the host-level steps are searched; a move is kept when the surrogate does not get worse.
// `max_swaps` counts pair swaps (a host exchange costs G); `seed` picks the sequence.
void search_host_blocks(const topo::Topology& topology, const Placement& placement,
                        const Pattern& pattern, std::vector<int>& order, int64_t max_swaps,
                        int log2_gpus, uint64_t seed);

}  // namespace topocoll::sched
