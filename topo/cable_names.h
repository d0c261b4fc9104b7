// Cables by name. A cable is the two directed links of one physical connection; people name
// it by the ids of its two ends, "U0-L3" or "s3.g0-U1" (either order), and one direction of
// it as "U0->L3", the way `plan` prints links. `describe --cables` lists every name, and the
// fabric's fault commands and the acceptance report use the same ones.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.h"

namespace topocoll::topo {

// Link ids of every network cable, one per cable: the direction the topology created first
// (endpoint -> switch, upper -> lower, node -> local switch, torus towards the higher
// package). Host fabric links are inside a host and are not cables.
std::vector<int> cable_links(const Topology& topology);

// "A-B" for the cable of `link` (either direction gives the same name, first end first);
// a second cable between the same two nodes is "A-B#2", and so on.
std::string cable_name(const Topology& topology, int link);
// "A->B" for one direction.
std::string link_name(const Topology& topology, int link);

struct CableSelection {
  int link = -1;                 // the cable's first direction, or the one direction named
  bool both_directions = true;   // false when named "A->B"
};

// Parses "A-B", "B-A" (the cable) or "A->B" (one direction); node ids may themselves hold
// '-'. Throws std::invalid_argument naming the text: no such node, no cable between the two,
// a host fabric link, or an ambiguous name.
CableSelection find_cable(const Topology& topology, std::string_view name);

}  // namespace topocoll::topo
