#include "sched/algorithm_registry.h"

#include <algorithm>
#include <stdexcept>

#include "config/algorithm_names.h"

namespace topocoll::sched {
namespace {

std::vector<Algorithm>& registry() {
  static std::vector<Algorithm> entries;
  return entries;
}

std::string joined(bool (*keep)(const Algorithm&, Collective), Collective collective) {
  std::string out;
  for (const Algorithm& a : registry())
    if (keep(a, collective)) out += (out.empty() ? "" : ", ") + std::string(a.name);
  return out;
}

}  // namespace

bool register_algorithm(const Algorithm& algorithm) {
  const std::string name(algorithm.name);
  if (name.empty() || !algorithm.build || algorithm.collectives.empty())
    throw std::logic_error("algorithm \"" + name + "\": needs a name, collectives and a builder");
  for (Collective c : kCollectives)
    if (algorithm.auto_collectives.contains(c) && !algorithm.collectives.contains(c))
      throw std::logic_error("algorithm \"" + name + "\": auto would weigh it for " +
                             std::string(to_string(c)) + ", which it has no schedule for");
  for (std::string_view route : config::route_names())
    if (algorithm.name == route)
      throw std::logic_error("algorithm \"" + name + "\": the name of an interposer route (config/algorithm_names.h)");
  std::vector<Algorithm>& entries = registry();
  for (const Algorithm& a : entries)
    if (a.name == algorithm.name || a.list_position == algorithm.list_position)
      throw std::logic_error("algorithm \"" + name + "\": name or list position " +
                             std::to_string(algorithm.list_position) + " already taken by \"" +
                             std::string(a.name) + "\"");
  const auto at = std::find_if(entries.begin(), entries.end(), [&](const Algorithm& a) {
    return a.list_position > algorithm.list_position;
  });
  entries.insert(at, algorithm);
  // TOPOCOLL_ALGO accepts it too (config/ cannot ask sched/, so it is told).
  config::add_schedule_algorithm_name(algorithm.name, algorithm.list_position);
  return true;
}

std::span<const Algorithm> algorithms() { return registry(); }

const Algorithm* find_algorithm(std::string_view name) {
  for (const Algorithm& a : registry())
    if (a.name == name) return &a;
  return nullptr;
}

std::string algorithm_list() {
  return joined([](const Algorithm&, Collective) { return true; }, Collective::AllReduce);
}

std::string algorithm_list(Collective collective) {
  return joined([](const Algorithm& a, Collective c) { return a.collectives.contains(c); }, collective);
}

std::string abbreviations(CollectiveSet collectives) {
  std::string out;
  for (Collective c : kCollectives)
    if (collectives.contains(c)) out += (out.empty() ? "" : ", ") + std::string(abbreviation(c));
  return out.empty() ? "-" : out;
}

std::string refusal(const Algorithm& algorithm, const AlgorithmShape& shape) {
  if (!algorithm.collectives.contains(shape.collective)) {
    const std::string c(to_string(shape.collective));
    return "no " + c + " schedule (" + c + ": " + algorithm_list(shape.collective) + ")";
  }
  if (shape.nranks < 1) return "nranks must be >= 1, got " + std::to_string(shape.nranks);
  return algorithm.refuses ? algorithm.refuses(shape) : std::string();
}

std::string auto_refusal(const Algorithm& algorithm, const AlgorithmShape& shape) {
  if (!algorithm.auto_collectives.contains(shape.collective))
    return "auto does not weigh it for " + std::string(to_string(shape.collective));
  if (shape.nranks > algorithm.auto_max_ranks)
    return "auto weighs it up to " + std::to_string(algorithm.auto_max_ranks) + " ranks";
  return "";
}

Schedule build_schedule(const Algorithm& algorithm, const BuildInput& input) {
  if (const std::string why = refusal(algorithm, input.shape); !why.empty())
    throw std::invalid_argument(std::string(algorithm.name) + ": " + why);
  if (input.count < 0) throw std::invalid_argument("count must be >= 0, got " + std::to_string(input.count));
  Schedule s = algorithm.build(input);
  s.algo = std::string(algorithm.name);
  return s;
}

}  // namespace topocoll::sched
