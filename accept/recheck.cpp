#include "accept/recheck.h"

#include <algorithm>
#include <map>

namespace topocoll::accept {

std::vector<std::pair<int, std::vector<int>>> flows_to_recheck(const Localization& loc, const std::vector<FlowMeasurement>& flows,
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
  std::vector<std::pair<int, std::vector<int>>> out(by_round.begin(), by_round.end());
  std::stable_sort(out.begin(), out.end(),
                   [&](const auto& a, const auto& b) { return nearest[a.first] > nearest[b.first]; });
  if (out.size() > size_t(std::max(0, max_rounds))) out.resize(size_t(std::max(0, max_rounds)));
  return out;
}

FlowMeasurement Recheck::best() const {
  if (again.dead) return first;
  if (first.dead) return again;
  return again.measured_gbps > first.measured_gbps ? again : first;
}

}  // namespace topocoll::accept
