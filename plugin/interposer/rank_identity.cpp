#include "plugin/interposer/rank_identity.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "config/value_grammar.h"

namespace topocoll::plugin::interposer {
namespace {

std::string identity_host(const RankIdentity& id) {
  return std::string(id.host, strnlen(id.host, sizeof id.host));
}

// domain:bus:device.function, compared as numbers: CUDA and the driver differ in case and
// in the domain's width ("0000:1A:00.0" vs "00000000:1a:00.0").
using PciAddress = std::array<unsigned, 4>;
bool parse_pci_address(const std::string& text, PciAddress& out) {
  char tail = 0;
  return std::sscanf(text.c_str(), "%x:%x:%x.%x%c", &out[0], &out[1], &out[2], &out[3], &tail) == 4;
}

// Position of `bus_id` among the GPUs listed in `dir`, sorted by address; -1 if not found.
int index_by_pci_address(const std::string& bus_id, const std::string& dir) {
  PciAddress mine{};
  if (!parse_pci_address(bus_id, mine)) return -1;
  std::vector<PciAddress> all;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    PciAddress a{};
    if (parse_pci_address(it->path().filename().string(), a)) all.push_back(a);
  }
  std::sort(all.begin(), all.end());
  const auto at = std::find(all.begin(), all.end(), mine);
  return at == all.end() ? -1 : int(at - all.begin());
}

}  // namespace

int host_gpu_index(int cuda_ordinal, const std::string& visible_devices, const std::string& pci_bus_id,
                   const std::string& driver_gpus_dir) {
  if (visible_devices.empty() || cuda_ordinal < 0) return cuda_ordinal;
  std::vector<int> indices;
  std::stringstream list(visible_devices);
  for (std::string item; std::getline(list, item, ',');) {
    const config::Parsed<int64_t> index = config::parse_count(item, 0, INT_MAX);
    if (!index) {
      // UUIDs, MIG names: the ordinal would be 0 in every process given one GPU, so ranks on
      // one host would collide. The bus id places the GPU among the host's. Two MIG
      // instances of one GPU share it and still collide (docs/usage.md).
      const int by_bus = index_by_pci_address(pci_bus_id, driver_gpus_dir);
      return by_bus >= 0 ? by_bus : cuda_ordinal;
    }
    indices.push_back(int(*index.value));
  }
  return cuda_ordinal < int(indices.size()) ? indices[cuda_ordinal] : cuda_ordinal;
}

RankIdentity make_identity(int gpu, const ProcessContext& context, bool can_serve,
                           int compute_capability, uint64_t settings_fingerprint) {
  RankIdentity id;
  id.gpu = gpu;
  id.settings_hash = settings_fingerprint;
  id.compute_capability = std::max(0, compute_capability);
  std::strncpy(id.host, context.host.name.c_str(), sizeof id.host - 1);
  if (context.topology) {
    id.flags |= RankIdentity::kTopologyLoaded;
    id.topology_hash = context.topology_fingerprint;
  }
  if (can_serve) id.flags |= RankIdentity::kCanServe;
  return id;
}

void mark_unserved(RankIdentity& id, const char* reason) noexcept {
  id.flags &= ~uint32_t(RankIdentity::kCanServe);
  std::memset(id.unserved_reason, 0, sizeof id.unserved_reason);
  if (reason) std::strncpy(id.unserved_reason, reason, sizeof id.unserved_reason - 1);
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
    // First: a rank that failed to prepare may not have filled in the rest of its record.
    if (id.unserved_reason[0] != '\0') {
      a.reason = where + " could not prepare topocoll's init: " +
                 std::string(id.unserved_reason, strnlen(id.unserved_reason, sizeof id.unserved_reason));
      return a;
    }
    if (!(id.flags & RankIdentity::kTopologyLoaded)) {
      a.reason = where + " has no valid topology (TOPOCOLL_TOPO_FILE unset or not loadable)";
      return a;
    }
    if (id.topology_hash != identities[0].topology_hash) {
      a.reason = where + " loaded a different topology than rank 0";
      return a;
    }
    if (id.settings_hash != identities[0].settings_hash) {
      a.reason = where + " runs with other routing settings than rank 0 (TOPOCOLL_ALGO, _MIN_BYTES, _MAX_BYTES, "
                 "_STEP_OVERHEAD_US, _AUTO_MARGIN, _SCRATCH_MAX_BYTES, _RING_COMM, _PIPELINE_CHUNK_BYTES, "
                 "_PIPELINE_MAX_CHUNKS; each rank logs its own at INFO): set them alike on every rank";
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
  a.min_compute_capability = n > 0 ? identities[0].compute_capability : 0;
  for (const RankIdentity& id : identities)
    a.min_compute_capability = std::min(a.min_compute_capability, id.compute_capability);
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
