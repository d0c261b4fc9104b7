// The schedule generators the exec tests run with real data: every (algorithm, collective)
// pair of the generator registry (sched/generator.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sched/generator.h"
#include "sched/schedule.h"

namespace topocoll::exec::testing {

struct GeneratorEntry {
  std::string name;  // "ring", "hd", ...
  sched::Collective collective;

  // Throws std::invalid_argument when the generator does not support this rank count
  // (callers skip those shapes; the registry documents its limits).
  sched::Schedule make(int nranks, int64_t count) const {
    return sched::generate(name, collective, nranks, count);
  }
};

inline void PrintTo(const GeneratorEntry& g, std::ostream* os) {
  *os << g.name << " " << sched::to_string(g.collective);
}

inline std::vector<GeneratorEntry> all_generators() {
  using sched::Collective;
  std::vector<GeneratorEntry> all;
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::AllToAll})
    for (const auto& algo : sched::algorithms_for(c)) all.push_back({algo, c});
  return all;
}

}  // namespace topocoll::exec::testing
