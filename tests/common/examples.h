// The bundled example topologies (examples/*.json) by name, for tests of every layer.
#pragma once

#include <string>

#include "topo/topology_json.h"

namespace topocoll::testing_support {

// examples/<name>, ".json" added when the name has no extension.
inline std::string example_path(const std::string& name) {
  const bool has_extension = name.find('.') != std::string::npos;
  return std::string(TOPOCOLL_SOURCE_DIR) + "/examples/" + name + (has_extension ? "" : ".json");
}

inline topo::Topology example_topology(const std::string& name) {
  return topo::load_topology_file(example_path(name));
}

}  // namespace topocoll::testing_support
