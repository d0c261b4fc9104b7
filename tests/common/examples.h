// The bundled example topologies (examples/*.json) by name, for tests of every layer.
#pragma once

#include <string>

#include "topo/topology_json.h"

namespace topocoll::testing_support {

// examples/<name>, ".json" added when the name has no extension.
// Appended piece by piece: GCC 12 at -O2 misreads the one-expression concatenation in some
// unity batches (-Warray-bounds).
inline std::string example_path(const std::string& name) {
  std::string path = TOPOCOLL_SOURCE_DIR;
  path += "/examples/";
  path += name;
  if (name.find('.') == std::string::npos) path += ".json";
  return path;
}

inline topo::Topology example_topology(const std::string& name) {
  return topo::load_topology_file(example_path(name));
}

}  // namespace topocoll::testing_support
