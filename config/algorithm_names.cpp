#include "config/algorithm_names.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace topocoll::config {
namespace {

constexpr std::string_view kRoutes[] = {"auto", "nccl", "nccl-topo-ring"};

struct Names {
  std::vector<std::pair<int, std::string_view>> schedules;  // (list position, name), sorted
  std::vector<std::string_view> all;                        // routes, then schedules
};

Names& names() {
  static Names n = [] {
    Names fresh;
    fresh.all.assign(std::begin(kRoutes), std::end(kRoutes));
    return fresh;
  }();
  return n;
}

}  // namespace

std::span<const std::string_view> algorithm_names() { return names().all; }

std::span<const std::string_view> route_names() { return kRoutes; }

void add_schedule_algorithm_name(std::string_view name, int list_position) {
  Names& n = names();
  if (std::find(n.all.begin(), n.all.end(), name) != n.all.end()) return;
  const std::pair<int, std::string_view> entry{list_position, name};
  n.schedules.insert(std::upper_bound(n.schedules.begin(), n.schedules.end(), entry), entry);
  n.all.assign(std::begin(kRoutes), std::end(kRoutes));
  for (const auto& [position, schedule] : n.schedules) n.all.push_back(schedule);
}

}  // namespace topocoll::config
