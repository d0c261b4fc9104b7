// Bisection bandwidth: the least capacity (Gb/s, one direction) of any set of cables whose
// removal splits the endpoints into two halves (sizes differ by at most one). Host fabric
// links are not counted: it is the network's bisection.
#pragma once

#include <string>

#include "topo/topology.h"

namespace topocoll::topo {

struct Bisection {
  double gbps = 0;
  int cables = 0;      // cables cut (of the cheapest split found)
  bool exact = false;  // true when proven minimal
  std::string method;  // how it was obtained, for describe
};

Bisection bisection(const Topology& topology);

}  // namespace topocoll::topo
