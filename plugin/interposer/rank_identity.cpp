#include "plugin/interposer/rank_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "plugin/interposer/interposer_params.h"
#include "topo/topology_json.h"

namespace topocoll::plugin::interposer {
namespace {

uint64_t fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

std::string identity_host(const RankIdentity& id) {
  return std::string(id.host, strnlen(id.host, sizeof id.host));
}

}  // namespace

ConfiguredTopology load_configured_topology(const std::string& path) {
  ConfiguredTopology result;
  if (path.empty()) return result;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    result.error = "cannot open TOPOCOLL_TOPO_FILE '" + path + "'";
    return result;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    result.topology = std::make_shared<const topo::Topology>(topo::load_topology_text(text.str()));
    result.hash = fnv1a(text.str());
  } catch (const std::exception& e) {
    result.error = "TOPOCOLL_TOPO_FILE '" + path + "': " + e.what();
  }
  return result;
}

const ConfiguredTopology& configured_topology() {
  static const ConfiguredTopology loaded = load_configured_topology(interposer_config().topo_file);
  return loaded;
}

std::string local_host_name() {
  if (const char* id = std::getenv("NCCL_HOSTID"); id && *id) return id;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "localhost";
  if (char* dot = std::strchr(host, '.')) *dot = '\0';
  return host;
}

int host_gpu_index(int cuda_ordinal) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!visible || !*visible || cuda_ordinal < 0) return cuda_ordinal;
  std::vector<int> indices;
  std::stringstream list(visible);
  for (std::string item; std::getline(list, item, ',');) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 0) return cuda_ordinal;  // UUIDs, MIG names: as is
    indices.push_back(int(v));
  }
  return cuda_ordinal < int(indices.size()) ? indices[cuda_ordinal] : cuda_ordinal;
}

RankIdentity make_identity(const std::string& host, int gpu, const ConfiguredTopology& topology,
                           bool can_serve) {
  RankIdentity id;
  id.gpu = gpu;
  std::strncpy(id.host, host.c_str(), sizeof id.host - 1);
  if (topology.topology) {
    id.flags |= RankIdentity::kTopologyLoaded;
    id.topology_hash = topology.hash;
  }
  if (can_serve) id.flags |= RankIdentity::kCanServe;
  return id;
}

ServiceAgreement agree_on_service(std::span<const RankIdentity> identities,
                                  const topo::Topology* topology) {
  ServiceAgreement a;
  const int n = int(identities.size());
  for (int r = 0; r < n; ++r) {
    const RankIdentity& id = identities[r];
    const std::string where = "rank " + std::to_string(r) + " (host '" + identity_host(id) +
                              "', GPU " + std::to_string(id.gpu) + ")";
    if (id.magic != RankIdentity::kMagic || id.version != RankIdentity::kVersion) {
      a.reason = where + " runs a different topocoll version or none";
      return a;
    }
    if (!(id.flags & RankIdentity::kTopologyLoaded)) {
      a.reason = where + " has no valid topology (TOPOCOLL_TOPO_FILE unset or not loadable)";
      return a;
    }
    if (id.topology_hash != identities[0].topology_hash) {
      a.reason = where + " loaded a different topology file than rank 0";
      return a;
    }
    if (!(id.flags & RankIdentity::kCanServe)) {
      a.reason = where + " cannot run topocoll schedules (no CUDA or a non-blocking communicator)";
      return a;
    }
  }
  if (!topology) {
    a.reason = "this rank has no topology";
    return a;
  }
  std::vector<sched::RankLocation> locations(n);
  for (int r = 0; r < n; ++r) locations[r] = {identity_host(identities[r]), identities[r].gpu};
  try {
    a.placement = sched::place_ranks(*topology, locations);
  } catch (const std::exception& e) {
    a.reason = std::string("placement failed: ") + e.what();
    return a;
  }
  a.served = true;
  return a;
}

}  // namespace topocoll::plugin::interposer
