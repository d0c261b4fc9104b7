// Placement: which topology endpoint each communicator rank runs on, and the rank orders
// (virtual rank -> communicator rank) that make a schedule fit the wiring.
//
//  - HD order (EFLOPS, HPCA'20, topology-aware halving-doubling): virtual rank v exchanges
//    with v XOR 2^s at step s (distance 1 first, as sched/halving_doubling.h). On a full
//    BiGraph the closed form puts every pair across the groups and every directed
//    inter-group link under one flow per step; other shapes get a search.
//  - Ring orders: rank order (what NCCL does) and a topology-aware ring whose every hop
//    crosses one inter-group link on a link no other hop uses (the honest baseline).
//  - NAP: package-major order (the nodes of a package consecutive) for hierarchical schedules.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "topo/topology.h"

namespace topocoll::sched {

class RouteCache;  // sched/link_load.h

// How a communicator rank knows itself: the host name and CUDA device index it reports.
struct RankLocation {
  std::string host;
  int gpu = 0;
};

struct Placement {
  std::vector<int> endpoint_of_rank;  // communicator rank -> endpoint index

  int nranks() const { return int(endpoint_of_rank.size()); }
};

// Looks every rank up in the topology; throws std::invalid_argument naming the first rank
// whose host/GPU is not there or whose endpoint is already taken by another rank.
Placement place_ranks(const topo::Topology& topology, std::span<const RankLocation> ranks);
// Ranks 0..n-1 on endpoints 0..n-1 (a partially filled cluster); throws when n is out of range.
Placement first_endpoints(const topo::Topology& topology, int nranks);
// Explicit endpoint indices; throws on an out-of-range or repeated endpoint.
Placement explicit_endpoints(const topo::Topology& topology, std::vector<int> endpoint_of_rank);

// A communication pattern over virtual ranks: per step, the directed pairs (src, dst) that
// exchange data and how many bytes each moves. Orders are searched against this pattern.
struct PatternStep {
  std::vector<std::pair<int, int>> pairs;
  double bytes = 1;  // bytes per pair in this step (weights the steps that move the most)
};
using Pattern = std::vector<PatternStep>;

// Recursive halving then doubling over the largest power of two <= n (distance 1 first),
// steps weighted by the Rabenseifner data volume (bytes/2, bytes/4, ...); the pre/post
// steps of a non-power-of-two count are not part of the order problem.
Pattern halving_doubling_pattern(int nranks, double bytes);

// An order and how good it is.
struct RankOrder {
  std::vector<int> rank_of_virtual;  // virtual rank -> communicator rank
  double max_load = 0;       // worst flows on one directed link over all steps of the pattern
  double lower_bound = 0;    // no order can do better than this on this placement
  int64_t total_hops = 0;    // links crossed by all flows of all steps
  bool closed_form = false;  // the EFLOPS closed form, not the search
};

// HD order for the placement: closed form on a full power-of-two BiGraph, search otherwise.
// `bytes` only weights the steps in the search (largest-data steps get the host-fabric pairs).
// `routes` (optional) shares the route cache with the link-load analysis that follows.
RankOrder hd_order(const topo::Topology& topology, const Placement& placement,
                   double bytes = 1 << 20, RouteCache* routes = nullptr);

// The search alone (greedy construction, then pairwise swaps evaluated incrementally),
// minimising the worst per-step link load, then the byte-weighted per-step loads, then hops.
// `max_swaps` bounds the improvement phase (0 = a size-dependent default).
RankOrder search_order(const topo::Topology& topology, const Placement& placement,
                       const Pattern& pattern, int64_t max_swaps = 0);

// Evaluates an order against a pattern (worst load, hops); fills the RankOrder fields.
RankOrder evaluate_order(const topo::Topology& topology, const Placement& placement,
                         const Pattern& pattern, std::vector<int> rank_of_virtual,
                         RouteCache* routes = nullptr);

// Ring orders (position i sends to position i+1).
std::vector<int> rank_order_ring(int nranks);
// Every hop crosses one inter-group link, each directed link at most once where the shape
// allows (an Eulerian circuit of the directed complete bipartite switch graph); ranks on one
// host stay adjacent otherwise.
std::vector<int> topology_aware_ring(const topo::Topology& topology, const Placement& placement);

// NAP: ranks grouped by package (package index, then node); other topologies: by host.
std::vector<int> package_major_order(const topo::Topology& topology, const Placement& placement);

}  // namespace topocoll::sched
