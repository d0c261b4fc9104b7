// Shared by the sched generator tests: verify one schedule in both aliasing modes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sched/schedule.h"
#include "sched/verifier.h"

namespace topocoll::sched::testing {

// Counts every sweep should cover for P ranks: empty, tiny, uneven, and several per rank.
inline std::vector<int64_t> sweep_counts(int P) {
  std::vector<int64_t> c{0, 1, int64_t(P) + 1, 7 * int64_t(P) + 3};
  if (P > 1) c.push_back(P - 1);
  return c;
}

// Verifies s out of place and (except all-to-all) in place; returns the out-of-place
// result for further checks. Failures name the schedule.
inline VerifyResult expect_verified(const Schedule& s, const std::string& what) {
  VerifyOptions o;
  o.self_check = s.nranks <= 128;
  VerifyResult out = verify(s, o);
  EXPECT_TRUE(out.ok) << what << " out of place: " << out.error;
  if (s.collective != Collective::AllToAll) {
    o.aliasing = Aliasing::InPlace;
    VerifyResult in = verify(s, o);
    EXPECT_TRUE(in.ok) << what << " in place: " << in.error;
    EXPECT_EQ(in.bitwise_identical, out.bitwise_identical) << what;
  }
  return out;
}

inline std::string name(const Schedule& s) {
  return s.algo + " " + std::string(to_string(s.collective)) + " P=" + std::to_string(s.nranks) +
         " count=" + std::to_string(s.count);
}

}  // namespace topocoll::sched::testing
