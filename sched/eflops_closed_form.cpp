#include "sched/eflops_closed_form.h"

#include <algorithm>
#include <bit>

#include "sched/bigraph_groups.h"

namespace topocoll::sched {

std::optional<ClosedFormOrder> eflops_closed_form(const topo::Topology& t, const Placement& p) {
  int n = p.nranks();
  if (n < 2 || !std::has_single_bit(unsigned(n))) return std::nullopt;
  std::optional<GroupedRanks> grouped = group_ranks(t, p);
  if (!grouped) return std::nullopt;
  const GroupedRanks& g = *grouped;
  int S = int(g[0].size());
  if (S == 0 || int(g[1].size()) != S || !std::has_single_bit(unsigned(S))) return std::nullopt;
  int E = int(g[0][0].size());
  for (int grp = 0; grp < 2; ++grp)
    for (const auto& sw : g[grp])
      if (int(sw.size()) != E) return std::nullopt;
  if (!std::has_single_bit(unsigned(E)) || 2 * S * E != n) return std::nullopt;
  int a = std::countr_zero(unsigned(S)), b = std::countr_zero(unsigned(E));
  unsigned low_mask = (1u << (a + b)) - 1;
  ClosedFormOrder out;
  out.bound = std::max(1.0, double(E) / S);
  out.rank_of_virtual.assign(n, -1);
  for (int v = 0; v < n; ++v) {
    unsigned low = unsigned(v) & low_mask;
    if (std::popcount(unsigned(v)) % 2 == 0)
      out.rank_of_virtual[v] = g[0][low & (S - 1)][(low >> a) & (E - 1)];
    else
      out.rank_of_virtual[v] = g[1][(low >> b) & (S - 1)][low & (E - 1)];
  }
  return out;
}

}  // namespace topocoll::sched
