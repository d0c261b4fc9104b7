// Does a topology describe the communicator NCCL is tuning? NCCL tells a tuner only nRanks
// and nNodes (not which host or GPU each rank is), so the rule is on counts, and the rank
// numbering is the launchers' convention NCCL's own rings assume: host by host.
//
//   fits  <=>  nNodes == number of hosts in the topology, and every host has exactly
//              nRanks / nNodes endpoints (so nRanks == number of endpoints);
//   then rank r runs on host r / ppn (hosts in the order the topology file lists them) and on
//   that host's (r % ppn)-th endpoint in ascending GPU index.
//
// A communicator on part of the cluster (a subset of hosts or GPUs) does not fit: which part
// is unknowable from the counts, and a wrong guess would tune for links the job never uses.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::plugin::tuner {

struct CommunicatorFit {
  std::optional<sched::Placement> placement;  // set when the topology describes the communicator
  std::string reason;                         // why not, for the INFO line
};

CommunicatorFit fit_communicator(const topo::Topology& topology, size_t nranks, size_t nnodes);

}  // namespace topocoll::plugin::tuner
