#include "config/algorithm_names.h"

namespace topocoll::config {

std::span<const std::string_view> algorithm_names() {
  static constexpr std::string_view kNames[] = {"auto", "nccl", "ring", "hd",
                                                "fc",   "fc-direct", "hier", "nccl-topo-ring"};
  return kNames;
}

}  // namespace topocoll::config
