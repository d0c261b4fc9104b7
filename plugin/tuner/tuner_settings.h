// What the tuner reads from the environment, validated (docs/usage.md, "Tuner plugin"):
//   TOPOCOLL_TOPO_FILE  topology JSON; unset = the tuner changes nothing
//   TOPOCOLL_TUNER      0/1, default 1: 0 turns the tuner face off
// plus NCCL's own overrides NCCL_ALGO and NCCL_PROTO, which the tuner honours by changing
// nothing. A bad value is an error naming the variable (the tuner then stays a no-op rather
// than guessing). Read at every communicator init, so each communicator sees the
// environment it was created under; logged only when a value differs from the last one seen.
#pragma once

#include <string>

namespace topocoll::plugin::tuner {

struct TunerSettings {
  bool enabled = true;
  std::string topo_file;      // empty = none
  std::string nccl_override;  // "NCCL_ALGO=..." / "NCCL_PROTO=..." when set, else empty
  std::string error;          // non-empty = a bad setting; the tuner must do nothing
};

TunerSettings read_tuner_settings();

}  // namespace topocoll::plugin::tuner
