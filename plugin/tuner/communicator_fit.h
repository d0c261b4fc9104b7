// Does a topology describe the communicator NCCL is tuning? NCCL tells a tuner only nRanks
// and nNodes (not which host or GPU each rank is), so the rule is on counts, and the rank
// numbering is the launchers' convention NCCL's own rings assume: host by host.
//
//   the job's hosts are known (TOPOCOLL_TUNER_HOSTS, in rank order) and nNodes == their
//   number: rank r runs on job host r / ppn, ppn = nRanks / nNodes, each of them a topology
//   host with exactly ppn endpoints;
//   else nNodes == number of hosts in the topology, and every host has exactly nRanks / nNodes
//   endpoints (so nRanks == number of endpoints): rank r runs on host r / ppn, hosts in the
//   order the topology file lists them;
//   either way on that host's (r % ppn)-th endpoint in ascending GPU index.
//
// Any other communicator on part of the cluster does not fit: which part is unknowable from
// the counts, and a wrong guess would tune for links the job never uses. Nor does any
// communicator when TOPOCOLL_TUNER_HOSTS names a host twice or one the topology lacks: the
// numbering is then unknown. A communicator of the right counts numbered otherwise (a split
// whose keys reorder the ranks) is tuned as if numbered as above: the counts cannot tell.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sched/placement.h"
#include "topo/topology.h"

namespace topocoll::plugin::tuner {

struct CommunicatorFit {
  std::optional<sched::Placement> placement;  // set when the topology describes the communicator
  std::string reason;                         // why not, for the INFO line
  std::string hosts_error;                    // TOPOCOLL_TUNER_HOSTS names what the topology lacks
};

// The host names of a TOPOCOLL_TUNER_HOSTS value: comma-separated, white space around each
// name ignored, empty names skipped.
std::vector<std::string> parse_job_hosts(const std::string& value);

CommunicatorFit fit_communicator(const topo::Topology& topology, size_t nranks, size_t nnodes,
                                 const std::vector<std::string>& job_hosts = {});

}  // namespace topocoll::plugin::tuner
