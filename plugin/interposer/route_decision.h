// Per-call routing decision of the interposer: NCCL, NCCL on the topology-ordered
// communicator, or a topocoll schedule (planned by sched/plan.h), from the cost model
// (sched/cost_model.h) unless TOPOCOLL_ALGO or the size thresholds decide. Deterministic:
// every rank computes the same route from the same topology, placement and key, which the
// collective agreement relies on.
//
// Auto compares predicted times (sched/plan.h, sched/cost_model.h) on this communicator's
// placement:
//   nccl            NCCL's ring in rank order (what NCCL builds for it; all-to-all: direct
//                   pairs), each step charged 1 us of in-kernel synchronisation
//   nccl-topo-ring  the same ring in the topology-aware order (every hop on its own link)
//   schedules       the planner's fastest topocoll schedule ("auto" over the algorithms of
//                   sched/algorithm_registry.h), each step charged TOPOCOLL_STEP_OVERHEAD_US
//                   more for the host work and launches of one step on the NCCL/CUDA backend
// and takes the fastest; NCCL keeps the call unless another is predicted
// TOPOCOLL_AUTO_MARGIN times faster (1.3 by default). A schedule the verifier rejects is
// never run.
#pragma once

#include <cstddef>
#include <memory>

#include "plugin/interposer/call_route_cache.h"
#include "plugin/interposer/interposer_config.h"
#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::plugin::interposer {

struct RouteRequest {
  const topo::Topology* topology = nullptr;
  const sched::Placement* placement = nullptr;
  int rank = 0;
  CallKey key;
  std::size_t elem_bytes = 4;
};

// A generator or cost-model failure gives RouteTarget::Nccl with the reason; only
// std::bad_alloc goes to the caller (the peers, with memory to spare, may serve the call, so
// no route may stand in for the one this rank could not plan).
std::shared_ptr<const Route> decide_route(const RouteRequest& request, const InterposerConfig& config);

// The route the settings alone decide, the same on every rank (TOPOCOLL_ALGO=nccl, outside
// TOPOCOLL_MIN_BYTES..TOPOCOLL_MAX_BYTES, a single rank): NCCL, or null when the call needs
// planning. Made when the library loads, so taking it allocates nothing: a rank out of host
// memory still sends such a call to NCCL, as its peers do.
std::shared_ptr<const Route> route_settled_by_config(const RouteRequest& request, const InterposerConfig& config);

}  // namespace topocoll::plugin::interposer
