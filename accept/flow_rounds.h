// Cable phase of acceptance: rounds of point-to-point flows chosen so that each round is
// contention-free by the model (no directed cable carries two flows) and together the
// rounds cross every cable in both directions several times, by different flows, so that a
// slow or dead cable can be told apart from the cables it shares flows with
// (accept/localization.h).
#pragma once

#include <vector>

#include "topo/topology.h"

namespace topocoll::accept {

// One measured flow: its ends, the local switch it is pinned to where the topology stripes
// (NAP; -1 elsewhere) and the directed cables it crosses (host fabric links left out).
struct ProbeFlow {
  int src = -1, dst = -1;  // endpoints
  int lane = -1;
  std::vector<int> links;
  friend bool operator==(const ProbeFlow&, const ProbeFlow&) = default;
};

struct FlowRound {
  std::vector<ProbeFlow> flows;
};

struct RoundPlan {
  std::vector<FlowRound> rounds;
  std::vector<int> crossings;  // per link id: how many planned flows cross it
  std::vector<int> unreachable;  // directed cable links no flow between present endpoints crosses
};

// `present`: the endpoints that have a rank (ascending). Every directed cable link that some
// flow between them crosses is crossed `coverage` times where the flows allow (fewer when
// fewer distinct flows cross it), in at most `max_rounds` rounds. Deterministic: every rank
// computes the same plan.
// `max_flows` bounds the flows of one round (0: only the cables bound them), for a test
// network whose hosts share one machine's cores.
RoundPlan plan_flow_rounds(const topo::Topology& topology, const std::vector<int>& present,
                           int coverage = 3, int max_rounds = 48, int max_flows = 0);

// The flow's path: Topology::route, pinned to local switch `lane` where it stripes.
std::vector<int> flow_links(const topo::Topology& topology, int src, int dst, int lane);

}  // namespace topocoll::accept
