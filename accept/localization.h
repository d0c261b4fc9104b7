// Which cables explain the slow and dead flows of the cable phase. A flow runs at the rate
// of its slowest cable, so every cable of a flow carries at least what the flow reached. A
// slow flow's culprit is among its cables that no flow has shown to carry what this one
// should have reached; when only one is left the localisation is certain, otherwise the
// report names the cables no flow separates.
#pragma once

#include <string>
#include <vector>

#include "accept/flow_rounds.h"
#include "topo/topology.h"

namespace topocoll::accept {

struct FlowMeasurement {
  ProbeFlow flow;
  int round = -1;
  double expected_gbps = 0;  // the model's rate: its slowest cable, alone on it
  double measured_gbps = 0;  // over the bytes that arrived (0: none did)
  bool dead = false;         // nothing arrived, or the connection could not be made
  std::string error;         // why, when dead or incomplete
  double rtt_us = -1;        // connection set-up round trip, when measured
  // Failed on its sender's host before a packet left (socket mark, bind; `error` says which):
  // named as that host's problem, never a cable's.
  bool local_error = false;
  double ratio() const { return expected_gbps > 0 ? measured_gbps / expected_gbps : 0; }
};

enum class CableState { Ok, Slow, Dead, Unmeasured };

// One direction of one cable.
struct LinkEvidence {
  int link = -1;
  int flows = 0;        // measured flows across it
  int bad_flows = 0;    // of those, below the threshold
  double cleared = 0;   // the fastest flow across it / its rate: it is at least this fast
  CableState state = CableState::Unmeasured;
  bool certain = false;  // the only uncleared cable of some bad flow
};

struct Finding {
  std::string kind;  // "slow cable", "dead cable", "unreachable endpoint", "unexplained"
  std::vector<int> links;      // directed links named (a cable's two directions when both)
  std::vector<int> endpoints;  // for unreachable endpoints
  double ratio = 0;            // measured / expected for slow cables (best evidence)
  std::string certainty;       // "certain" or "one of N cables no flow separates"
  std::string detail;          // a sentence for people
};

struct Localization {
  std::vector<LinkEvidence> links;  // indexed by link id (host fabric links: Unmeasured)
  std::vector<Finding> findings;
  std::vector<int> unexplained_flows;  // bad flows whose cables were all cleared (wiring?)
};

Localization localize(const topo::Topology& topology, const std::vector<FlowMeasurement>& flows,
                      double threshold);

std::string to_string(CableState state);

}  // namespace topocoll::accept
