// Topology-free generation: an algorithm of the registry (sched/algorithm_registry.h) built
// for nranks ranks in a given order, with no topology to choose one (rank order when none is
// given; hier and hier-hd with one rank per group). What `bench` runs without --topo and
// what the generator suites test; the planner (sched/plan.h) is the same registry with a
// topology.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sched/schedule.h"

namespace topocoll::sched {

struct GenerateRequest {
  std::string algo;
  Collective collective = Collective::AllReduce;
  int nranks = 1;
  int64_t count = 0;
  std::vector<int> order;  // position / virtual rank -> communicator rank; empty: identity
};

// Throws std::invalid_argument naming an unknown algorithm (and the known ones), the
// registry's refusal of the shape ("<algo>: <reason>"), or a bad count or order.
Schedule generate(const GenerateRequest& request);
Schedule generate(std::string_view algo, Collective collective, int nranks, int64_t count,
                  std::span<const int> order = {});

}  // namespace topocoll::sched
