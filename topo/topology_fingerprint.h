// One answer to "did these processes load the same topology?": a 64-bit FNV-1a over the
// topology's canonical JSON (topology_to_json), so every field that can change a decision
// (links, speeds, hosts, names) counts, and layout, key order and whitespace of the file do
// not. The interposer's init exchange carries it whole; the net plugin's connect handle
// carries 32 bits of it (plugin/net/socket_net.cpp). Never 0, so 0 can mean "none".
#pragma once

#include <cstdint>

#include "topo/topology.h"

namespace topocoll::topo {

uint64_t topology_fingerprint(const Topology& topology);

}  // namespace topocoll::topo
