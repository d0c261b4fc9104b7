#include "plugin/tuner/tuner_settings.h"

#include <cstdlib>
#include <mutex>

#include "plugin/log.h"
#include "plugin/param.h"

namespace topocoll::plugin::tuner {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// The raw values seen last, so a job that creates many communicators logs its settings once.
struct SeenEnv {
  std::string enabled, topo_file;
  bool any = false;
  bool operator==(const SeenEnv&) const = default;
};

}  // namespace

TunerSettings read_tuner_settings() {
  static std::mutex mutex;
  static SeenEnv last;

  SeenEnv now{env_or_empty("TOPOCOLL_TUNER"), env_or_empty("TOPOCOLL_TOPO_FILE"), true};
  bool log_it;
  {
    std::lock_guard<std::mutex> lock(mutex);
    log_it = !(now == last);
    last = now;
  }

  TunerSettings s;
  if (!now.enabled.empty()) {
    std::string why;
    if (auto v = parse_bool(now.enabled, &why)) {
      s.enabled = *v;
      if (log_it) TC_INFO(NCCL_ENV | NCCL_TUNING, "TOPOCOLL_TUNER set by environment to %d", int(*v));
    } else {
      s.error = "TOPOCOLL_TUNER: " + why;
    }
  }
  s.topo_file = now.topo_file;
  if (!s.topo_file.empty() && log_it)
    TC_INFO(NCCL_ENV | NCCL_TUNING, "TOPOCOLL_TOPO_FILE set by environment to %s", s.topo_file.c_str());

  // NCCL reads these itself; an empty value is "unset" for NCCL too.
  for (const char* name : {"NCCL_ALGO", "NCCL_PROTO"}) {
    std::string v = env_or_empty(name);
    if (!v.empty() && s.nccl_override.empty()) s.nccl_override = std::string(name) + "=" + v;
  }
  return s;
}

}  // namespace topocoll::plugin::tuner
