// A Graphviz drawing of a topology: BiGraph upper and lower groups as two rows with their
// endpoints above and below; NAP packages as boxes laid out on their torus grid.
#pragma once

#include <string>

#include "topo/topology.h"

namespace topocoll::topo {

struct DotDrawing {
  std::string dot;                  // the graph in the DOT language
  std::vector<std::string> engine;  // command that lays it out, e.g. {"dot"} or {"neato", "-n2"}
};

DotDrawing topology_to_dot(const Topology& topology);

}  // namespace topocoll::topo
