// Host-aware HD order for BiGraphs whose servers hold several GPUs: the GPU's index within
// its host in the low log2(G) bits of the virtual rank, so HD's first and largest halving
// steps (bytes/2, bytes/4, ...) stay on the host fabric; the host-level bits, and which GPU
// takes which index, from a search that keeps that structure (the EFLOPS parity rule as the
// seed: partners cross groups). perf/results/hd-multi-gpu.md has the measurements.
#pragma once

#include <optional>
#include <vector>

#include "sched/link_load.h"
#include "sched/pattern_load.h"
#include "sched/placement.h"
#include "sched/schedule.h"
#include "topo/topology.h"

namespace topocoll::sched {

// Virtual rank v = (host bits, local bits). With `parity_flip` the local index is flipped
// on hosts of odd popcount, so at every cross-host step the partner is the neighbouring GPU
// of the other host, whose NIC sits in the other group when NICs alternate (the EFLOPS
// parity rule, applied to hosts). Empty unless every host holds the same power-of-two
// number G > 1 of ranks and the host count is a power of two; `log2_g` gets log2(G).
std::vector<int> host_major_order(const topo::Topology& topology, const Placement& placement,
                                  int* log2_g = nullptr, bool parity_flip = true);

// The host-major order improved by the host-structured search (sched/order_search.h);
// nullopt where host_major_order is empty, or above 8192 ranks. Reduce-scatter and
// allgather alone run distance q/2 first, so for them the virtual rank is bit-reversed
// (GPU index in the high bits; at most 1024 ranks, see the .cpp). `bytes` weights the
// pattern's steps; `routes` (optional) shares the route cache.
std::optional<RankOrder> host_aware_hd_order(const topo::Topology& topology,
                                             const Placement& placement, double bytes = 1 << 20,
                                             RouteCache* routes = nullptr,
                                             Collective collective = Collective::AllReduce);

}  // namespace topocoll::sched
