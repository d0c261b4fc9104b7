// Inventory phase: what each rank says about itself (host, GPU, its NICs and their
// addresses) and how the job's ranks match the topology file: endpoints missing from the
// job, hosts the file does not know, two ranks on one endpoint, a GPU or NIC the file
// places where the host has none.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/env.h"
#include "topo/topology.h"

namespace topocoll::accept {

struct RankIdentity {
  int rank = -1;
  std::string host;  // config::local_host(env): TOPOCOLL_HOSTNAME, NCCL_HOSTID, gethostname()
  int gpu = 0;       // CUDA device index the rank stands for (--gpu, LOCAL_RANK, ...)
  int gpus_visible = 0;  // NVIDIA devices this host shows (0 without a driver)
  std::vector<std::pair<std::string, std::string>> interfaces;  // name, address
  std::string address;  // where the rank measures from: its NIC's address ("" = not found)
  std::string address_source;  // how the address was found, or why not
  int flow_port = 0;    // its flow listener (accept/flow_probe.h)
};

nlohmann::json identity_json(const RankIdentity& identity);
RankIdentity identity_from_json(const nlohmann::json& j);  // throws std::runtime_error

// This process: hostname, interfaces, GPUs; the address of its endpoint's NIC (an explicit
// `bind` wins; else the NIC named in the topology for (host, gpu), resolved as the net
// plugin does).
RankIdentity describe_this_rank(int rank, int gpu, const std::string& bind,
                                const topo::Topology& topology);
// The GPU index a launcher gave this process: the first good one of LOCAL_RANK,
// OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, MPI_LOCALRANKID (a bad one is a warning of the
// Env, config/env.h); 0 when none is.
int launcher_local_gpu(const config::Env& env);

struct InventoryProblem {
  std::string kind;  // "extra host", "unknown GPU", "duplicate", "no NIC address", "missing"
  int rank = -1;
  int endpoint = -1;
  std::string detail;
};

struct InventoryMatch {
  std::vector<int> endpoint_of_rank;  // -1 for ranks that cannot be measured
  std::vector<int> present;           // endpoints with a usable rank, ascending
  std::vector<int> missing;           // expected endpoints no rank stands for
  std::vector<InventoryProblem> problems;
  bool ok() const { return problems.empty(); }
};

// `expected`: the endpoints the job should cover (empty = every endpoint of the topology).
InventoryMatch match_inventory(const topo::Topology& topology,
                               const std::vector<RankIdentity>& ranks,
                               const std::vector<int>& expected);

}  // namespace topocoll::accept
