// Follows a packet through a fabric plan's rules and tables the way the kernel's policy
// routing does (rules by priority, matched on source, input interface and mark; longest
// prefix in the table; a table without a match falls through to the next rule; the mark is
// cleared when a packet leaves its namespace). The tests use it to prove that the compiled
// tables send every flow over exactly the cables Topology::route names; `fabric route`
// prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fabric/fabric_plan.h"

namespace topocoll::fabric {

struct WalkResult {
  std::vector<int> links;  // directed topology links crossed, in order
  bool multipath = false;  // a route on the way had several next hops (the first was taken)
};

// The cables a packet from endpoint `from` to endpoint `to` crosses when its socket carries
// `mark` (0 = none). Throws std::runtime_error when a namespace has no route, on a loop,
// or when an interface leads nowhere.
WalkResult walk_route(const FabricPlan& plan, int from, int to, uint32_t mark = 0);

}  // namespace topocoll::fabric
