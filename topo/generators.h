// Regular shapes expanded into explicit topologies (the JSON "generated" forms use these).
#pragma once

#include <string>

#include "topo/topology.h"

namespace topocoll::topo {

class TopologyBuilder;

// Both throw TopologyError("/shape/<field>", reason) for a shape that cannot be built.
Topology generate_bigraph(const BiGraphShape& shape);
Topology generate_nap(const NapShape& shape);

// Shape checks; `prefix` is the JSON pointer of the object holding the fields ("/shape" for
// the generated form, "" for NAP's explicit form, which has the same field names).
void check_bigraph_shape(const BiGraphShape& shape, const std::string& prefix);
void check_nap_shape(const NapShape& shape, const std::string& prefix);

// NAP wiring around nodes already added to `builder` (every endpoint has package and node
// set): the k local switches of every package, every node cabled to each of them, and the
// torus cables joining node i of neighbouring packages.
void add_nap_wiring(TopologyBuilder& builder, const NapShape& shape);

// Limits shared by generators and the loader: rates in [0.001, 100000] Gb/s, latencies in
// [0, 10000] us. Throw TopologyError(pointer, reason).
inline constexpr double kMinGbps = 0.001;
inline constexpr double kMaxGbps = 100000;
inline constexpr double kMaxLatencyUs = 10000;
inline constexpr long kMaxEndpoints = 65536;
inline constexpr long kMaxCables = 1L << 21;
void check_gbps(double gbps, const std::string& pointer);
void check_latency_us(double latency_us, const std::string& pointer);

}  // namespace topocoll::topo
