#include "exec/rank_environment.h"

#include <stdexcept>

#include "exec/bootstrap.h"

namespace topocoll::exec {

namespace {

// The value of a launcher's rank or size variable; a bad one (config/env.h refuses it rather
// than guess) is the error, naming the variable and what it should be.
int launcher_value(const config::EnvSetting& s) {
  if (!s.problem.empty()) throw std::invalid_argument(s.problem);
  return int(std::get<int64_t>(s.value));
}

// TOPOCOLL_RANK and TOPOCOLL_NRANKS come together (topocoll's launchers set both, and take
// every other launcher's variables out of their ranks' environment). One without the other,
// or a TOPOCOLL_NRANKS another launcher's size contradicts, is a pair left exported from an
// earlier job: taken first, it would give every rank of this job the same number.
void check_topocoll_pair(const config::Env& e) {
  const config::EnvSetting& rank = e.setting("TOPOCOLL_RANK");
  const config::EnvSetting& size = e.setting("TOPOCOLL_NRANKS");
  if (rank.is_set() != size.is_set()) {
    const config::EnvSetting& given = rank.is_set() ? rank : size;
    throw std::invalid_argument(std::string(given.variable->name) + "=" + *given.text + " without " +
                                (rank.is_set() ? "TOPOCOLL_NRANKS" : "TOPOCOLL_RANK") +
                                ": set both (topocoll's launchers do) or neither (left from another job?)");
  }
  if (!size.is_set() || !size.problem.empty()) return;
  const config::EnvSetting* other = e.first_set({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"});
  if (!other || !other->problem.empty() || std::get<int64_t>(other->value) == std::get<int64_t>(size.value)) return;
  throw std::invalid_argument("TOPOCOLL_NRANKS=" + *size.text + " but " + std::string(other->variable->name) + "=" +
                              *other->text + ": TOPOCOLL_RANK/TOPOCOLL_NRANKS left from another job? unset them "
                              "to take this launcher's rank");
}

}  // namespace

std::optional<RankEnvironment> rank_environment_from_env(const config::Env& e) {
  check_topocoll_pair(e);
  const config::EnvSetting* rank =
      e.first_set({"TOPOCOLL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"});
  const config::EnvSetting* size =
      e.first_set({"TOPOCOLL_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"});
  if (!rank || !size) return std::nullopt;
  RankEnvironment env;
  env.rank = launcher_value(*rank);
  env.nranks = launcher_value(*size);
  env.rank_variable = std::string(rank->variable->name);
  env.size_variable = std::string(size->variable->name);
  if (env.rank >= env.nranks)
    throw std::invalid_argument(env.rank_variable + "=" + *rank->text + " outside 0.." +
                                std::to_string(env.nranks - 1) + " (" + env.size_variable + ")");
  std::string bootstrap_variable;
  if (!e.bootstrap.empty()) {
    env.bootstrap = e.bootstrap;
    bootstrap_variable = "TOPOCOLL_BOOTSTRAP=" + env.bootstrap;
  } else if (!e.master_addr.empty()) {
    env.bootstrap = e.master_addr + ":" + e.master_port;
    bootstrap_variable = "MASTER_ADDR:MASTER_PORT=" + env.bootstrap;
  }
  if (!env.bootstrap.empty()) {
    // Checked here, so a typo is an error naming the variable, not a 60 s wait.
    BootstrapAddress parsed;
    try {
      parsed = BootstrapAddress::parse(env.bootstrap);
    } catch (const std::invalid_argument& err) {
      throw std::invalid_argument(bootstrap_variable + ": " + err.what());
    }
    if (parsed.port == 0)
      throw std::invalid_argument(bootstrap_variable + ": port 0 names no root; give the root's port (1..65535)");
  }
  env.root_served_externally = e.bootstrap_served;
  return env;
}

}  // namespace topocoll::exec
