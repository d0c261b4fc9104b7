// Route compiler: Topology::route for every pair of endpoints on different hosts, turned into
// Linux policy routing in each namespace of a fabric plan. Where a packet is decides its next
// cable:
//  - leaving its origin endpoint E: table "origin E" (rule: from E's address); a flow that
//    stripes over several paths (NAP: one per local switch) gets a multipath route there and
//    one "stripe j" table per path, chosen by the socket mark of the connection's lane j;
//  - forwarded by node N (a switch, or a NAP node on the torus): N's "transit" table (rule:
//    input interface is one of N's), the switch namespaces' main table;
//  - where two flows to one destination would leave N on different cables, the minority
//    gets a rule of its own (from its source, in through N): routes stay exact, not
//    destination-only approximations.
// The main table of a host namespace is its first endpoint's origin table, so programs that
// bind no address (ping, ssh) still take the model's path.
#pragma once

#include <vector>

#include "fabric/fabric_plan.h"
#include "topo/topology.h"

namespace topocoll::fabric {

// Where each graph node lives and how its neighbours reach it.
struct NodeAddressing {
  std::vector<int> ns_of_node;               // graph node -> namespace index
  std::vector<std::string> address_of_node;  // graph node -> address (endpoints, switches)
  std::vector<std::string> device_of_link;   // link id -> interface on its `from` side
};

inline constexpr uint32_t kFirstLaneMark = 0x100;
inline constexpr int kExceptionRulePriority = 100;
inline constexpr int kStripeRulePriority = 500;
inline constexpr int kOriginRulePriority = 1000;
inline constexpr int kTransitRulePriority = 2000;

// Rule classes in lookup order: exceptions (one source's flows), stripes (a lane's marks),
// origins (a host's own packets), transit. Each starts at its usual priority above, or right
// after the class before when that one is longer (a namespace forwarding for hundreds of
// sources has thousands of exception rules): a class spilling into the next would have some
// of its rules looked up after the next class's, and those flows would take the majority's
// path. The compiler numbers each rule within its class, class c from c * kRuleClassSpan;
// place_rule_classes gives them their priorities, or throws std::invalid_argument naming
// the namespace when they do not fit before the main table's rule (32766).
inline constexpr int kRuleClassSpan = 1 << 24;
void place_rule_classes(Namespace& ns);

// Fills tables, rules and lane marks of `plan`'s namespaces.
void compile_routes(const topo::Topology& topology, const NodeAddressing& addressing,
                    FabricPlan& plan);

}  // namespace topocoll::fabric
