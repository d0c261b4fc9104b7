// libFuzzer target for the topology loader: any input either loads or is rejected with a
// TopologyError. Any other exception, a crash, a sanitizer report or a hang is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "topo/bisection.h"
#include "topo/topology_dot.h"
#include "topo/topology_error.h"
#include "topo/topology_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    topocoll::topo::Topology t = topocoll::topo::load_topology_text(
        std::string_view(reinterpret_cast<const char*>(data), size));
    const int n = int(t.endpoints().size());
    // What loaded must also save and reload. The round trip triples the work, and near the
    // loader's size limits (65,536 endpoints, 2^21 cables) one load alone takes seconds under
    // ASan, so it runs on topologies below 100,000 links; every input is still loaded.
    if (t.links().size() <= 100000) {
      topocoll::topo::Topology again =
          topocoll::topo::topology_from_json(topocoll::topo::topology_to_json(t));
      if (again.endpoints().size() != t.endpoints().size()) __builtin_trap();
    }
    if (n > 1) {
      t.route(0, n - 1);
      t.route(n - 1, 0);
    }
    // What describe and draw compute, on topologies small enough to stay fast.
    if (n <= 1024 && t.switches().size() <= 64) {
      t.diameter_hops();
      topocoll::topo::bisection(t);
      topocoll::topo::topology_to_dot(t);
    }
  } catch (const topocoll::topo::TopologyError&) {
  }
  return 0;
}
