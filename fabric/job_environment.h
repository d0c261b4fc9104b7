// What each rank of an unmodified NCCL job on a fabric is told (`topocoll fabric run` and
// `rank-exec`, docs/fabric.md): where it runs — its endpoint's host namespace, under the
// host's name — and the environment that makes NCCL treat it as that host: NCCL_HOSTID,
// NCCL_SOCKET_IFNAME naming exactly its endpoint's address, the topology at the fabric's
// rates, the plugin faces asked for, the job's hosts for the tuner, and the launcher variables (RANK, LOCAL_RANK,
// MASTER_ADDR, ...) as a job on that cluster would see them. Pure: tested as such.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fabric/fabric_plan.h"

namespace topocoll::fabric {

struct JobOptions {
  std::string topology_file;  // TOPOCOLL_TOPO_FILE: the fabric's topology at its rates
  std::string preload;        // LD_PRELOAD, in front of any inherited (libnccl-topocoll.so); "" = none
  std::string tuner_plugin;   // NCCL_TUNER_PLUGIN; "" = unchanged
  std::string net_plugin;     // NCCL_NET_PLUGIN; "" = unchanged
  int master_port = 29500;    // MASTER_PORT where the launcher set no MASTER_ADDR (torch's default)
  std::vector<std::string> rank0_environment;  // KEY=VALUE for rank 0 only (NCCL_DEBUG=INFO)
};

// The value a variable has in the environment the launcher gave the rank (nullopt: unset).
using InheritedEnvironment = std::function<std::optional<std::string>(std::string_view name)>;

struct RankSetting {
  int rank = 0, nranks = 0;
  int endpoint = -1;                     // topology endpoint index
  std::string netns;                     // its host's namespace (tf-<fabric>-<host>)
  std::string hostname;                  // the topology host's name
  std::vector<std::string> environment;  // KEY=VALUE, set over the inherited environment
  std::vector<std::string> unset;        // inherited variables to remove
  // What the job should hear about a choice made for it (a face asked for and turned off),
  // the same on every rank: printed once, by rank 0.
  std::vector<std::string> notes;
};

// Rank `rank` of a job whose rank r runs on endpoints[r]. Launcher variables the launcher
// already set (RANK, WORLD_SIZE, MASTER_ADDR/MASTER_PORT: torchrun's, mpirun's) are kept;
// LOCAL_RANK and LOCAL_WORLD_SIZE (and Open MPI's local rank and size, where set) describe
// the emulated host: the rank's position among the job's endpoints on it. Throws
// std::invalid_argument for a rank outside the job or an endpoint not in the plan.
RankSetting rank_setting(const FabricPlan& plan, const std::string& fabric_name, const std::vector<int>& endpoints,
                         int rank, const JobOptions& options, const InheritedEnvironment& inherited);

}  // namespace topocoll::fabric
