// Wiring phase: where probes went against where the file says they go. Responders are
// identified by the addresses a fabric knows, else by majority: an address that answers
// where the file expects node X in most probes is X. The first hop at which a probe
// reached another node than expected names the cable it left by: the port the file cables
// to X leads elsewhere. Two ports of one node leading to each other's node are a swap.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "accept/flow_rounds.h"
#include "accept/path_probe.h"
#include "topo/topology.h"

namespace topocoll::accept {

struct PathObservation {
  ProbeFlow flow;
  PathTrace trace;
};

struct WiringFinding {
  std::vector<int> links;  // the directed links whose far end is not where the file says
  std::string detail;
  int probes = 0;          // probes that showed it
};

struct WiringReport {
  int probes = 0;
  int hops_expected = 0, hops_answered = 0;
  std::vector<WiringFinding> findings;
  std::map<std::string, std::string> node_of_address;  // responder address -> node id
};

// `known`: address -> graph node, where the addresses of switches are known (the fabric).
WiringReport analyze_wiring(const topo::Topology& topology,
                            const std::vector<PathObservation>& observations,
                            const std::map<std::string, int>& known);

}  // namespace topocoll::accept
