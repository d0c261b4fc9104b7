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
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sched/schedule.h"
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

// HD order for the placement: closed form on a full power-of-two BiGraph, search otherwise;
// on multi-GPU hosts also the host-aware order, kept when the cost model predicts the HD
// `collective` of `bytes` (nccl-tests size) faster with it (ties: the search's). `bytes`
// also weights the steps in the search. `routes` (optional) shares the route cache with
// the analysis that follows. Throws std::invalid_argument for AllToAll.
RankOrder hd_order(const topo::Topology& topology, const Placement& placement,
                   double bytes = 1 << 20, RouteCache* routes = nullptr,
                   Collective collective = Collective::AllReduce);

// The candidates hd_order ranks by predicted time. The closed form or the search alone
// (worst link load over all steps, then byte-weighted loads, then hops):
RankOrder hd_search_order(const topo::Topology& topology, const Placement& placement,
                          double bytes = 1 << 20, RouteCache* routes = nullptr);
// Host-aware (every host holds the same power-of-two number G > 1 of ranks, the host count
// is a power of two, at most 8192 ranks; nullopt otherwise): the GPU's index within its
// host in the low log2(G) bits of the virtual rank, so the first and largest halving steps
// stay on the host fabric; the host-level bits, and which GPU takes which index, from a
// search that keeps that structure (EFLOPS parity rule as the seed: partners cross groups).
// Reduce-scatter and allgather alone run distance q/2 first, so for them the virtual rank
// is bit-reversed (GPU index in the high bits; at most 1024 ranks, see the .cpp).
std::optional<RankOrder> host_aware_hd_order(const topo::Topology& topology,
                                             const Placement& placement, double bytes = 1 << 20,
                                             RouteCache* routes = nullptr,
                                             Collective collective = Collective::AllReduce);
// Switch-major (power-of-two rank counts): ranks sorted by the switch behind them (BiGraph
// access switch, NAP package), then host and GPU, so HD's low distances and largest steps
// stay behind one switch; wins on partially filled clusters, where the closed form puts
// E flows on one inter-group link at every step.
std::vector<int> switch_major_order(const topo::Topology& topology, const Placement& placement);
// The cost model's time (us) for the HD `collective` of `bytes` (4-byte elements, nccl-tests
// size) under an order: the ranking hd_order applies between its candidates.
double predicted_hd_us(const Placement& placement, std::span<const int> rank_of_virtual,
                       double bytes, RouteCache& routes,
                       Collective collective = Collective::AllReduce);

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
