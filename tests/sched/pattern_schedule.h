// Test support: a Schedule whose steps are exactly the directed pairs of a Pattern (each
// pair one Send and one matching Recv of `count` elements), for analyses that only route.
#pragma once

#include "sched/pattern_load.h"
#include "sched/schedule.h"

namespace topocoll::sched::testing {

inline Schedule pattern_schedule(int nranks, const Pattern& pattern, int64_t count) {
  Schedule s;
  s.nranks = nranks;
  s.algo = "pattern";
  s.count = count;
  s.input_count = count;
  s.output_count = count;
  s.programs.resize(nranks);
  for (auto& p : s.programs) p.step_begin.push_back(0);
  for (const auto& st : pattern) {
    for (auto [a, b] : st.pairs) {
      Op send;
      send.kind = OpKind::Send;
      send.peer = b;
      send.count = count;
      send.srcs[0] = {Buf::Input, 0};
      s.programs[a].ops.push_back(send);
      Op recv;
      recv.kind = OpKind::Recv;
      recv.peer = a;
      recv.count = count;
      recv.dst = {Buf::Scratch, 0};
      s.programs[b].ops.push_back(recv);
    }
    for (auto& p : s.programs) p.step_begin.push_back(uint32_t(p.ops.size()));
  }
  return s;
}

// The same placement seen through an order: virtual rank v sits where rank order[v] sits.
inline Placement through_order(const Placement& p, const std::vector<int>& order) {
  Placement out;
  for (int r : order) out.endpoint_of_rank.push_back(p.endpoint_of_rank[r]);
  return out;
}

}  // namespace topocoll::sched::testing
