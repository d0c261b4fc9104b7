// Rank orders measured against a communication pattern: the yardstick every order search
// minimises (sched/order_search.h, sched/hd_search_order.h, sched/ring_order.h).
//
// A pattern lists, per step, the directed pairs of virtual ranks that exchange data; an
// order (virtual rank -> communicator rank) lays it on the placement's endpoints, and its
// load is the worst number of flows on one directed network link in any step. Host fabric
// links (NVLink/NVSwitch) are free for this problem: the network is what contends.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "sched/link_load.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::sched {

// One step of a pattern: the directed pairs (src, dst) that exchange data and how many
// bytes each moves (weights the steps that move the most).
struct PatternStep {
  std::vector<std::pair<int, int>> pairs;
  double bytes = 1;
};
using Pattern = std::vector<PatternStep>;

// Recursive halving then doubling over the largest power of two <= n (distance 1 first),
// steps weighted by the Rabenseifner data volume (bytes/2, bytes/4, ...); the pre/post
// steps of a non-power-of-two count are not part of the order problem.
Pattern halving_doubling_pattern(int nranks, double bytes);
// The halving steps alone: the doubling steps repeat their pairs.
Pattern halving_pattern(int nranks, double bytes);

// An order and how good it is.
struct RankOrder {
  std::vector<int> rank_of_virtual;  // virtual rank -> communicator rank
  double max_load = 0;       // worst flows on one directed link over all steps of the pattern
  double lower_bound = 0;    // no order can do better than this on this placement
  int64_t total_hops = 0;    // links crossed by all flows of all steps
  bool closed_form = false;  // the EFLOPS closed form, not the search
};

// Whether a link counts in an order's load (host fabric links do not).
bool contends(const topo::Link& link);

// Evaluates an order against a pattern (worst load, hops, lower bound); fills the RankOrder
// fields. `routes` (optional) shares a route cache with the caller.
RankOrder evaluate_order(const topo::Topology& topology, const Placement& placement,
                         const Pattern& pattern, std::vector<int> rank_of_virtual,
                         RouteCache* routes = nullptr);

// Lower worst load, then fewer hops.
bool better_order(const RankOrder& a, const RankOrder& b);

}  // namespace topocoll::sched
