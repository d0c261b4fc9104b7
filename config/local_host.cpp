#include "config/local_host.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>

namespace topocoll::config {

LocalHost local_host() {
  for (const char* variable : {"TOPOCOLL_HOSTNAME", "NCCL_HOSTID"})
    if (const char* value = std::getenv(variable); value && *value) return {value, variable};
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || !*name) return {"localhost", "gethostname()"};
  return {name, "gethostname()"};
}

}  // namespace topocoll::config
