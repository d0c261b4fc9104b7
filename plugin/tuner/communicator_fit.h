// Does a topology describe the communicator NCCL is tuning? NCCL tells a tuner nRanks and
// nNodes (v5: also the smallest and largest node's rank count), not which host or GPU each
// rank is, so the rule is on counts, and the rank numbering is the launchers' convention
// NCCL's own rings assume: host by host.
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

// How many ranks NCCL's smallest and largest node hold (tuner v5's ncclNvlDomainInfo_v5_t:
// NCCL 2.28 sets it from the communicator's local rank counts before the tuner's init).
struct RanksPerNode {
  size_t min = 0, max = 0;
};

// Why a communicator whose nodes hold different numbers of ranks is not tuned (empty when
// they hold the same, or when NCCL gave zeros): the counts rule below assumes nRanks / nNodes
// on every host, so a 3 + 5 communicator of a 4 + 4 topology would be tuned for rings and
// trees it does not run.
std::string uneven_nodes(const RanksPerNode& per_node);

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
