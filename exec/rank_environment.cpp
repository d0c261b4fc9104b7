#include "exec/rank_environment.h"

#include <cstdlib>
#include <stdexcept>

#include "exec/bootstrap.h"

namespace topocoll::exec {

namespace {

// The first variable of the list that is set: (name, value).
std::optional<std::pair<std::string, std::string>> first_set(
    std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = std::getenv(n); v && *v) return std::pair{std::string(n), std::string(v)};
  return std::nullopt;
}

int parse_int(const std::string& name, const std::string& value) {
  std::size_t pos = 0;
  int v = -1;
  try {
    v = std::stoi(value, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (pos != value.size() || value.empty())
    throw std::invalid_argument(name + "='" + value + "' is not an integer");
  return v;
}

}  // namespace

std::optional<RankEnvironment> rank_environment_from_env() {
  const auto rank = first_set(
      {"TOPOCOLL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "RANK"});
  const auto size = first_set(
      {"TOPOCOLL_NRANKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "WORLD_SIZE"});
  if (!rank || !size) return std::nullopt;
  RankEnvironment env;
  env.rank = parse_int(rank->first, rank->second);
  env.nranks = parse_int(size->first, size->second);
  env.rank_variable = rank->first;
  env.size_variable = size->first;
  if (env.nranks < 1)
    throw std::invalid_argument(size->first + "=" + size->second + ": must be at least 1");
  if (env.rank < 0 || env.rank >= env.nranks)
    throw std::invalid_argument(rank->first + "=" + rank->second + " outside 0.." +
                                std::to_string(env.nranks - 1) + " (" + size->first + ")");
  std::string bootstrap_variable;
  if (const auto b = first_set({"TOPOCOLL_BOOTSTRAP"})) {
    env.bootstrap = b->second;
    bootstrap_variable = "TOPOCOLL_BOOTSTRAP=" + b->second;
  } else if (const auto addr = first_set({"MASTER_ADDR"})) {
    const auto port = first_set({"MASTER_PORT"});
    env.bootstrap = addr->second + ":" + (port ? port->second : "29500");
    bootstrap_variable = "MASTER_ADDR:MASTER_PORT=" + env.bootstrap;
  }
  if (!env.bootstrap.empty()) {
    // Checked here, so a typo is an error naming the variable, not a 60 s wait.
    BootstrapAddress parsed;
    try {
      parsed = BootstrapAddress::parse(env.bootstrap);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(bootstrap_variable + ": " + e.what());
    }
    if (parsed.port == 0)
      throw std::invalid_argument(bootstrap_variable + ": port 0 names no root; give the root's port (1..65535)");
  }
  if (const char* s = std::getenv("TOPOCOLL_BOOTSTRAP_SERVED"); s && std::string(s) == "1")
    env.root_served_externally = true;
  return env;
}

}  // namespace topocoll::exec
