#include "sched/hier_grouping.h"

#include <map>

namespace topocoll::sched {
namespace {

bool is_nap(const topo::Topology& t) { return t.kind() == topo::TopologyKind::Nap; }

// Ranks per group: NAP packages, or hosts.
std::map<int, int> ranks_per_group(const topo::Topology& t, const Placement& p) {
  std::map<int, int> per_group;
  for (int e : p.endpoint_of_rank) {
    const auto& ep = t.endpoints()[e];
    ++per_group[is_nap(t) ? ep.package : ep.host_index];
  }
  return per_group;
}

}  // namespace

std::string hier_grouping_refusal(const topo::Topology& t, const Placement& p) {
  const std::map<int, int> per_group = ranks_per_group(t, p);
  if (per_group.empty()) return "no ranks";
  const int size = per_group.begin()->second;
  for (const auto& [group, n] : per_group)
    if (n != size)
      return std::string("groups (") + (is_nap(t) ? "packages" : "hosts") +
             ") hold different numbers of ranks";
  if (per_group.size() < 2) return "all ranks are in one group";
  if (size < 2) return "one rank per group (nothing to do inside a group)";
  return "";
}

HierParams hier_params(const topo::Topology& t, const Placement& p, InterGroupAlgo inter) {
  HierParams params;
  params.group_size = ranks_per_group(t, p).begin()->second;
  params.inter = inter;
  if (is_nap(t) && params.group_size == t.nodes_per_package() &&
      p.nranks() / params.group_size == t.package_count())
    // The topology numbers packages row-major (dimension 0 varies slowest: topology.h
    // torus_dims), the schedule its groups with dimension 0 fastest (hierarchical.h): the
    // dimensions reversed, so each ring runs along one torus line of neighbouring packages.
    params.torus_dims.assign(t.torus_dims().rbegin(), t.torus_dims().rend());
  return params;
}

}  // namespace topocoll::sched
