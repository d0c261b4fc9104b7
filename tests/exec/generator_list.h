// The schedules the exec tests run with real data: every algorithm of the registry
// (sched/algorithm_registry.h) with every collective it has, built without a topology (rank
// order, as sched/generator.h builds them). Entries that share a builder (ring and ring-topo,
// hd and hd-naive) differ only in the order a topology gives them; without one they build
// the same schedule, which runs once, under the first entry's name.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sched/algorithm_registry.h"
#include "sched/generator.h"
#include "sched/schedule.h"

namespace topocoll::exec::testing {

struct GeneratorEntry {
  std::string name;  // "ring", "hd", ...
  sched::Collective collective;

  // Throws std::invalid_argument for a shape the registry refuses.
  sched::Schedule make(int nranks, int64_t count) const {
    return sched::generate(name, collective, nranks, count);
  }

  // Why the registry refuses this entry at nranks ranks without a topology ("" when not).
  std::string refusal(int nranks) const {
    return sched::refusal(*sched::find_algorithm(name), {.collective = collective, .nranks = nranks});
  }

  // The schedule; nullopt for a shape the registry refuses, once the generator has refused
  // it with the registry's reason. Any other failure throws: a generator that rejects a
  // shape the registry accepts (or rejects everything) fails the suites that call this.
  std::optional<sched::Schedule> make_unless_refused(int nranks, int64_t count) const {
    const std::string why = refusal(nranks);
    if (why.empty()) return make(nranks, count);
    try {
      make(nranks, count);
    } catch (const std::invalid_argument& e) {
      if (e.what() == name + ": " + why) return std::nullopt;
      throw std::logic_error(name + " at " + std::to_string(nranks) + " ranks: refused with \"" + e.what() +
                             "\", but the registry's reason is \"" + why + "\"");
    }
    throw std::logic_error(name + " at " + std::to_string(nranks) + " ranks: built a shape the registry refuses (" +
                           why + ")");
  }
};

inline void PrintTo(const GeneratorEntry& g, std::ostream* os) {
  *os << g.name << " " << sched::to_string(g.collective);
}

inline std::vector<GeneratorEntry> all_generators() {
  std::vector<GeneratorEntry> all;
  for (sched::Collective c : sched::kCollectives) {
    std::vector<decltype(sched::Algorithm::build)> built;
    for (const sched::Algorithm& a : sched::algorithms()) {
      if (!a.collectives.contains(c)) continue;
      bool same_schedule = false;
      for (auto b : built) same_schedule |= b == a.build;
      if (same_schedule) continue;
      built.push_back(a.build);
      all.push_back({std::string(a.name), c});
    }
  }
  return all;
}

}  // namespace topocoll::exec::testing
