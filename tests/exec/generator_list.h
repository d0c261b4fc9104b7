// The schedule generators the exec tests run with real data.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "sched/halving_doubling.h"
#include "sched/ring.h"
#include "sched/schedule.h"

namespace topocoll::exec::testing {

struct GeneratorEntry {
  std::string name;  // "ring", "hd", ...
  sched::Collective collective;
  std::function<sched::Schedule(int nranks, int64_t count)> make;
  int max_ranks = 1 << 30;  // generators limited to some shapes say so
};

// For gtest messages (instead of a byte dump).
inline void PrintTo(const GeneratorEntry& g, std::ostream* os) {
  *os << g.name << " " << sched::to_string(g.collective);
}

inline std::vector<GeneratorEntry> all_generators() {
  using sched::Collective;
  return {
      {"ring", Collective::AllReduce, [](int p, int64_t n) { return sched::ring_allreduce(p, n); }},
      {"ring", Collective::ReduceScatter,
       [](int p, int64_t n) { return sched::ring_reduce_scatter(p, n); }},
      {"ring", Collective::AllGather, [](int p, int64_t n) { return sched::ring_allgather(p, n); }},
      {"hd", Collective::AllReduce, [](int p, int64_t n) { return sched::hd_allreduce(p, n); }},
      {"hd", Collective::ReduceScatter,
       [](int p, int64_t n) { return sched::hd_reduce_scatter(p, n); }},
      {"hd", Collective::AllGather, [](int p, int64_t n) { return sched::hd_allgather(p, n); }},
  };
}

}  // namespace topocoll::exec::testing
