// Where a job's ranks run on a topology, chosen the way a cluster's scheduler, or its user
// with `topocoll order`, would choose (the emulated fabric's launcher, docs/fabric.md):
//   scheduler       the first N endpoints in the file's order (hosts as listed, GPUs in
//                   order): a scheduler handing out the lowest-numbered free nodes, and what
//                   `bench --fabric --ranks N` runs on;
//   spread          one endpoint per switch (BiGraph) or package (NAP) before a second on
//                   any: a small job spread over an idle cluster, as `topocoll demo` places it;
//   topology-order  the scheduler's endpoints, their hosts in the order `topocoll order`
//                   prints: the rank-order ring NCCL builds across nodes is then the
//                   topology-aware one;
//   endpoints=LIST  rank r on the r-th endpoint named (ids or indices, comma-separated).
// Also the host order `topocoll order` recommends and the hostfiles launchers read.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "topo/topology.h"

namespace topocoll::sched {

struct JobPlacement {
  enum class Kind { Scheduler, Spread, TopologyOrder, Endpoints };
  Kind kind = Kind::Scheduler;
  std::vector<std::string> endpoints;  // Endpoints: as given
};

// "scheduler", "spread", "topology-order" or "endpoints=A,B,..."; throws
// std::invalid_argument naming the text and the choices.
JobPlacement parse_job_placement(std::string_view text);
std::string to_string(const JobPlacement& placement);

// Rank -> endpoint for `nranks` ranks (0: every endpoint; for endpoints=LIST, the list's
// length). Throws std::invalid_argument when the topology has too few endpoints or a listed
// one is unknown or repeated.
std::vector<int> place_job(const topo::Topology& topology, int nranks, const JobPlacement& placement);

// `endpoints` with their hosts reordered so that the rank-order ring over them is the
// topology-aware ring (sched/ring_order.h), each host's endpoints together in GPU order, as
// launchers number ranks host by host. What `topocoll order` prints.
std::vector<int> launcher_ring_order(const topo::Topology& topology, const std::vector<int>& endpoints);

// The hosts of rank-ordered `endpoints` as a launcher reads them:
//   list       one host per line, in order of first rank
//   mpirun     an Open MPI hostfile, "host slots=<its ranks>"
//   torchrun   "host node_rank" per line
//   slurm      a SLURM_HOSTFILE, one line per rank (srun --distribution=arbitrary)
//   endpoints  endpoint ids, comma-separated, one line (bench --endpoints, endpoints=LIST)
// Throws std::invalid_argument for another format.
std::string hostfile(const topo::Topology& topology, const std::vector<int>& endpoints, std::string_view format);
inline constexpr std::string_view kHostfileFormats = "list, mpirun, torchrun, slurm, endpoints";

}  // namespace topocoll::sched
