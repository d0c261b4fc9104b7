#include "sched/site_major_order.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <tuple>

namespace topocoll::sched {

using topo::Topology;

std::vector<int> switch_major_order(const Topology& t, const Placement& p) {
  std::vector<int> order(size_t(p.nranks()));
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int r) {
    const topo::Endpoint& e = t.endpoints()[size_t(p.endpoint_of_rank[size_t(r)])];
    return std::tuple(e.attach_switch >= 0 ? e.attach_switch : e.package, e.host_index, e.gpu, r);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

std::vector<int> package_major_order(const Topology& t, const Placement& p) {
  std::vector<int> order(size_t(std::max(p.nranks(), 0)));
  std::iota(order.begin(), order.end(), 0);
  const auto& eps = t.endpoints();
  auto key = [&](int r) {
    const auto& e = eps[p.endpoint_of_rank[r]];
    if (t.kind() == topo::TopologyKind::Nap) return std::array<int, 3>{e.package, e.node, r};
    return std::array<int, 3>{e.host_index, e.gpu, r};
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return order;
}

}  // namespace topocoll::sched
