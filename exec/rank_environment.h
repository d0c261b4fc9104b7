// Who this process is in a multi-process run, from the launcher's environment, so the same
// binary runs under our own launcher, mpirun, srun or torchrun-style launchers:
//   rank:   TOPOCOLL_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK, SLURM_PROCID, RANK
//   size:   TOPOCOLL_NRANKS, OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_NTASKS, WORLD_SIZE
//   root:   TOPOCOLL_BOOTSTRAP=host:port, else MASTER_ADDR:MASTER_PORT
// The first variable set in each list wins. TOPOCOLL_RANK and TOPOCOLL_NRANKS go together
// and agree with another launcher's size where one is set (else: stale, refused). Values come from an Env (config/env.h): trimmed,
// plain integers; a bad one is refused, not replaced.
#pragma once

#include <optional>
#include <string>

#include "config/env.h"

namespace topocoll::exec {

struct RankEnvironment {
  int rank = -1;
  int nranks = -1;
  std::string bootstrap;       // host:port of the rendezvous root; empty when unknown
  std::string rank_variable;   // which variables said so (for messages)
  std::string size_variable;
  // The launcher serves the rendezvous itself (TOPOCOLL_BOOTSTRAP_SERVED true); otherwise
  // rank 0 hosts it at `bootstrap`.
  bool root_served_externally = false;
};

// nullopt when no rank/size pair is set. Throws std::invalid_argument naming the variable
// when one is set but malformed or out of range.
std::optional<RankEnvironment> rank_environment_from_env(const config::Env& env);

}  // namespace topocoll::exec
