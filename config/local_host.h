// Which host this process runs on, by one rule for every face — the interposer, the tuner,
// the net plugin and `topocoll accept` (docs/usage.md, "Which host am I"):
//   1. TOPOCOLL_HOSTNAME, when set;
//   2. NCCL_HOSTID, when set (NCCL then treats the process as that host, as nccl-tests
//      launchers and the GPU machine's checks do to run several "hosts" on one machine);
//   3. gethostname(), whole.
// Both variables come from the process's Env (config/env.h), trimmed like every value. The
// name is looked up in a topology with Topology::find_host, which also accepts it with or
// without its domain.
#pragma once

#include <string>

#include "config/env.h"

namespace topocoll::config {

struct LocalHost {
  std::string name;
  const char* source = "";  // "TOPOCOLL_HOSTNAME", "NCCL_HOSTID" or "gethostname()"
};

LocalHost local_host(const Env& env);

}  // namespace topocoll::config
