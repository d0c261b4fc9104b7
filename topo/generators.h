// Regular shapes expanded into explicit topologies (the JSON "generated" forms use these).
#pragma once

#include "topo/topology.h"

namespace topocoll::topo {

Topology generate_bigraph(const BiGraphShape& shape);
Topology generate_nap(const NapShape& shape);

}  // namespace topocoll::topo
