#include "config/local_host.h"

#include <unistd.h>

#include <climits>

namespace topocoll::config {

LocalHost local_host(const Env& env) {
  if (!env.hostname.empty()) return {env.hostname, "TOPOCOLL_HOSTNAME"};
  if (!env.nccl_hostid.empty()) return {env.nccl_hostid, "NCCL_HOSTID"};
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !*name) return {"localhost", "gethostname()"};
  return {name, "gethostname()"};
}

}  // namespace topocoll::config
