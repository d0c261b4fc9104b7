#include "accept/recheck.h"

#include <algorithm>

namespace topocoll::accept {

std::map<int, std::vector<int>> flows_to_recheck(const Localization& loc, const std::vector<FlowMeasurement>& flows,
                                                 double threshold, int max_rounds) {
  std::map<int, std::vector<int>> by_round;
  std::map<int, double> nearest;  // round -> its slow flows' best ratio
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& m = flows[i];
    if (m.dead || m.ratio() >= threshold) continue;
    const bool across_slow = std::any_of(m.flow.links.begin(), m.flow.links.end(), [&](int l) {
      return size_t(l) < loc.links.size() && loc.links[l].state == CableState::Slow;
    });
    if (!across_slow) continue;
    by_round[m.round].push_back(int(i));
    nearest[m.round] = std::max(nearest[m.round], m.ratio());
  }
  std::vector<int> rounds;
  for (const auto& [r, _] : by_round) rounds.push_back(r);
  std::stable_sort(rounds.begin(), rounds.end(), [&](int a, int b) { return nearest[a] > nearest[b]; });
  std::map<int, std::vector<int>> out;
  for (size_t k = 0; k < rounds.size() && int(k) < max_rounds; ++k) out[rounds[k]] = by_round[rounds[k]];
  return out;
}

FlowMeasurement Recheck::best() const {
  if (again.dead) return first;
  if (first.dead) return again;
  return again.measured_gbps > first.measured_gbps ? again : first;
}

}  // namespace topocoll::accept
