#include "topo/topology_fingerprint.h"

#include <string>

#include "topo/topology_json.h"

namespace topocoll::topo {

uint64_t topology_fingerprint(const Topology& topology) {
  // nlohmann::json keeps object keys sorted, so the dump is canonical.
  const std::string text = topology_to_json(topology).dump();
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h == 0 ? 1 : h;
}

}  // namespace topocoll::topo
