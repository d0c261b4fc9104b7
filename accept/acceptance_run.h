// One acceptance run across the job's ranks (docs/acceptance.md): every rank runs this with
// the same options; the phases proceed in lockstep through the bootstrap group.
//   1. inventory   — who each rank is, matched against the file;
//   2. cables      — contention-free rounds of flows over every cable, both directions,
//                    each flow's rate against the model's, slow and dead cables localised;
//   3. wiring      — path probes against the file's routes, and flows that were slow in
//                    their round re-run alone (fast alone = they met traffic the file
//                    routes elsewhere);
//   4. collectives — every algorithm the planner offers, on every endpoint, results checked.
// Rank 0 prints progress and writes the report; every wait is bounded (the budget, the
// bootstrap's and the transport's timeouts), and a rank that dies is named by the others.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "accept/acceptance_report.h"
#include "exec/bootstrap.h"
#include "exec/pipeline.h"
#include "net/transport_options.h"
#include "sched/cost_model.h"
#include "topo/topology.h"

namespace topocoll::accept {

struct AcceptanceOptions {
  topo::Topology topology;              // the file, at the rates the cluster should reach
  std::string topology_file;
  std::vector<int> expected_endpoints;  // the job's endpoints (empty: all of the file)
  double budget_s = 600;
  double threshold = 0.8;               // a cable below this share of its rate fails
  int streams = 4;                      // TCP connections per measured flow
  int coverage = 3;                     // flows across each cable direction
  int max_flows_per_round = 0;          // 0: as many as the cables allow
  std::vector<std::string> phases = {"inventory", "cables", "wiring", "collectives"};
  std::string report_dir;               // rank 0 writes report.json, report.txt, topology.png
  std::string bind;                     // this rank's NIC address ("" = resolve the NIC)
  int gpu = 0;                          // the GPU this rank stands for
  std::vector<uint32_t> lane_marks;     // where flows stripe: the socket mark of lane j
  std::map<std::string, int> known_addresses;  // address -> graph node, where known
  net::TransportOptions transport;      // the collectives' transport
  // The collectives' predictions, with the engine's pipelining (exec/pipeline.h).
  sched::CostParams cost{.pipeline = exec::PipelineOptions::host_default().shape};
};

// Returns the process's exit code: rank 0 returns 0 only when the cluster passed; the
// others return 0 unless they failed themselves.
int run_acceptance(const AcceptanceOptions& options, exec::BootstrapClient& group,
                   const std::function<void(const std::string&)>& progress);

}  // namespace topocoll::accept
