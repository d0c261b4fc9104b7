#include "plugin/split_placements.h"

#include "plugin/kept_for_process.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <utility>

namespace topocoll::plugin {
namespace {

struct Registered {
  uint64_t id = 0;
  std::vector<int> endpoint_of_rank;
};

// NCCL runs a group's inits in threads of its own: one registry for the process, locked,
// and kept for it (kept_for_process.h: NCCL's threads may still make communicators at exit).
std::mutex& registry_mutex() {
  static std::mutex* m = kept_for_process(new std::mutex);
  return *m;
}
std::vector<Registered>& registry() {
  static std::vector<Registered>* r = kept_for_process(new std::vector<Registered>);
  return *r;
}
uint64_t g_next_id = 1;  // under registry_mutex
std::atomic<bool> g_consulted{false};

}  // namespace

SplitPlacements::Scope::Scope(std::vector<std::vector<int>> endpoint_of_rank) {
  std::lock_guard lock(registry_mutex());
  id_ = g_next_id++;
  for (auto& placement : endpoint_of_rank) registry().push_back({id_, std::move(placement)});
}

SplitPlacements::Scope::~Scope() {
  std::lock_guard lock(registry_mutex());
  std::erase_if(registry(), [&](const Registered& r) { return r.id == id_; });
}

SplitPlacements::Lookup SplitPlacements::find(const topo::Topology& topology, std::size_t nranks,
                                              std::size_t nnodes) {
  Lookup out;
  g_consulted.store(true);
  std::lock_guard lock(registry_mutex());
  for (const Registered& r : registry()) {
    if (r.endpoint_of_rank.size() != nranks || host_count(topology, r.endpoint_of_rank) != nnodes) continue;
    if (out.endpoint_of_rank.empty() && !out.ambiguous) {
      out.endpoint_of_rank = r.endpoint_of_rank;
    } else if (out.endpoint_of_rank != r.endpoint_of_rank) {
      out.endpoint_of_rank.clear();
      out.ambiguous = true;
    }
  }
  return out;
}

std::optional<std::size_t> SplitPlacements::host_count(const topo::Topology& topology,
                                                        const std::vector<int>& endpoints) {
  std::set<int> hosts;
  for (int e : endpoints) {
    if (e < 0 || e >= int(topology.endpoints().size())) return std::nullopt;
    hosts.insert(topology.endpoints()[std::size_t(e)].host_index);
  }
  return hosts.size();
}

bool SplitPlacements::consulted() { return g_consulted.load(); }

void SplitPlacements::reserve(std::size_t more) {
  std::lock_guard lock(registry_mutex());
  registry().reserve(registry().size() + more);
}

}  // namespace topocoll::plugin
