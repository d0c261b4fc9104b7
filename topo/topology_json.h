// JSON load/save of topologies (format: docs/topology.md, schema: docs/topology.schema.json).
// Loading validates everything and throws TopologyError naming the JSON pointer and reason.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "topo/topology.h"
#include "topo/topology_error.h"

namespace topocoll::topo {

// A topology file is a regular file of at most kMaxTopologyFileBytes: a device (/dev/zero),
// a FIFO or a directory is refused by name before anything is read, and no more than the
// limit is ever read (a file growing while read is cut off there and refused). 64 MiB holds
// the largest topology the loader takes (65,536 endpoints, 2,097,152 cables as links).
inline constexpr size_t kMaxTopologyFileBytes = size_t(64) << 20;
Topology load_topology_file(const std::string& path);
Topology load_topology_text(std::string_view json_text);
Topology topology_from_json(const nlohmann::json& doc);
// Always the explicit form; load(save(t)) describes the same network as t.
nlohmann::json topology_to_json(const Topology& topology);
// A topology document as text for people: fields in the order docs/topology.md lists them,
// small objects and arrays on one line. Parses back to the same document.
std::string topology_json_text(const nlohmann::json& doc);

}  // namespace topocoll::topo
