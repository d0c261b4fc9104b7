// The acceptance report: everything a run found, as JSON (schema in docs/acceptance.md), a
// text summary, and a drawing of the topology with every cable coloured by measured /
// expected rate and the failing parts marked.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "accept/interference.h"
#include "accept/inventory.h"
#include "accept/localization.h"
#include "accept/recheck.h"
#include "accept/wiring.h"
#include "topo/topology.h"

namespace topocoll::accept {

struct PhaseResult {
  std::string name;    // inventory, cables, wiring, collectives
  // pass; fail; skipped (not asked for, or ruled out by a failure elsewhere); incomplete
  // (the budget ended it before it checked everything it should: not a pass)
  std::string status;
  std::string summary;
};

struct CollectiveCheck {
  std::string algo, collective;
  int64_t bytes = 0;
  double predicted_us = -1, measured_us = -1, max_link_load = -1;
  int64_t wrong = -1;
  std::string error;  // a run that failed or was skipped, and why
};

struct AcceptanceResult {
  std::string topology_file;
  std::string started;  // UTC, ISO 8601
  double duration_s = 0, budget_s = 0, threshold = 0.8;
  int ranks = 0;
  std::vector<RankIdentity> identities;
  InventoryMatch inventory;
  std::vector<std::vector<FlowMeasurement>> rounds;  // the cable phase, round by round
  double flow_seconds = 0;  // how long each round's flows ran
  std::vector<Recheck> rechecks;  // slow flows across slow cables, run again; rounds hold the faster
  Localization localization;
  std::vector<int> unreachable_links;  // no flow between present endpoints crosses them
  WiringReport wiring;
  std::vector<InterferenceCheck> interference;
  std::vector<CollectiveCheck> collectives;
  std::vector<PhaseResult> phases;
  std::string aborted;  // a rank failed and the run stopped: why
  // "fail" when aborted or a phase failed, else "incomplete" when a phase is, else "pass".
  std::string verdict() const;
  bool passed() const { return verdict() == "pass"; }
};

nlohmann::json report_json(const topo::Topology& topology, const AcceptanceResult& result);
std::string report_text(const topo::Topology& topology, const AcceptanceResult& result);
// Graphviz: every endpoint, switch and cable; a cable green when at least the threshold,
// orange below it, red when dead, purple when miswired, grey when not measured.
std::string report_dot(const topo::Topology& topology, const AcceptanceResult& result);

}  // namespace topocoll::accept
