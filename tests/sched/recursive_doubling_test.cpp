#include "sched/recursive_doubling.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sched/halving_doubling.h"
#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;
using testing::sweep_counts;

TEST(RecursiveDoubling, VerifiesBitwiseIdenticalForEveryRankCountTo257) {
  for (int P = 1; P <= 257; ++P)
    for (int64_t c : sweep_counts(P)) {
      const Schedule s = rd_allreduce(P, c);
      EXPECT_TRUE(expect_verified(s, name(s)).bitwise_identical) << name(s);
    }
}

TEST(RecursiveDoubling, PowersOfTwoTo4096) {
  for (int P = 2; P <= 4096; P *= 2) {
    const Schedule s = rd_allreduce(P, 5);
    EXPECT_TRUE(expect_verified(s, name(s)).bitwise_identical) << name(s);
  }
}

TEST(RecursiveDoubling, HalfTheStepsOfHalvingDoublingWithTheSamePairs) {
  const int P = 16;
  const Schedule s = rd_allreduce(P, 1600);
  const Schedule hd = hd_allreduce(P, 1600);
  ASSERT_EQ(s.num_steps(), 4);
  ASSERT_EQ(hd.num_steps(), 8);
  for (int st = 0; st < 4; ++st)
    for (int v = 0; v < P; ++v) {
      int sends = 0;
      for (const Op& op : s.programs[size_t(v)].step(st)) {
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
          EXPECT_EQ(op.peer, v ^ (1 << st));
          EXPECT_EQ(op.count, 1600);  // the whole vector every step
        }
        sends += op.kind == OpKind::Send;
      }
      EXPECT_EQ(sends, 1);
    }
  // Non-power-of-two: the fold before and the result back after.
  EXPECT_EQ(rd_allreduce(12, 100).num_steps(), 2 + 3);
}

TEST(RecursiveDoubling, FollowsTheOrderIncludingFoldedRanks) {
  for (int P : {16, 24}) {
    std::vector<int> order(static_cast<size_t>(P));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(P));
    const Schedule s = rd_allreduce(P, 1000, order);
    EXPECT_TRUE(expect_verified(s, name(s)).bitwise_identical);
    const int q = 16, pre = P > q ? 1 : 0;
    for (int v = 0; v < q; ++v)
      for (const Op& op : s.programs[size_t(order[size_t(v)])].step(pre))
        if (op.kind == OpKind::Send) {
          EXPECT_EQ(op.peer, order[size_t(v ^ 1)]);
        }
    for (int e = 0; e + q < P; ++e)
      for (const Op& op : s.programs[size_t(order[size_t(q + e)])].ops)
        EXPECT_EQ(op.peer, order[size_t(e)]);
  }
}

}  // namespace
}  // namespace topocoll::sched
