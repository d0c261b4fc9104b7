#include "sched/ring.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;
using testing::sweep_counts;

// Ring schedules hold O(P^2) ops, so every P to 64, then every 9th, and 255..257.
std::vector<int> rank_counts() {
  std::vector<int> v;
  for (int P = 1; P <= 64; ++P) v.push_back(P);
  for (int P = 73; P < 255; P += 9) v.push_back(P);
  for (int P : {255, 256, 257}) v.push_back(P);
  return v;
}

TEST(Ring, AllCollectivesVerifyForRankCountsTo257) {
  for (int P : rank_counts()) {
    for (int64_t c : sweep_counts(P)) {
      for (Schedule s : {ring_allreduce(P, c), ring_reduce_scatter(P, c), ring_allgather(P, c)}) {
        VerifyResult r = expect_verified(s, name(s));
        EXPECT_TRUE(r.bitwise_identical) << name(s);
      }
    }
  }
}

TEST(Ring, PowersOfTwoTo512) {
  for (int P = 2; P <= 512; P *= 2) {
    const int64_t c = 3 * int64_t(P) + 1;
    for (Schedule s : {ring_allreduce(P, c), ring_reduce_scatter(P, c / P + 1), ring_allgather(P, 2)})
      expect_verified(s, name(s));
  }
}

TEST(Ring, StepCountsAndTraffic) {
  const int P = 8;
  const int64_t c = 8 * 100;
  Schedule s = ring_allreduce(P, c);
  EXPECT_EQ(s.num_steps(), 2 * (P - 1));
  VerifyResult r = verify(s);
  ASSERT_TRUE(r.ok) << r.error;
  // 2(P-1)/P of the vector leaves every rank.
  EXPECT_EQ(r.stats.max_send_elems_per_rank, 2 * (P - 1) * c / P);
  EXPECT_EQ(ring_reduce_scatter(P, 10).num_steps(), P - 1);
  EXPECT_EQ(ring_allgather(P, 10).num_steps(), P - 1);
}

TEST(Ring, FollowsTheOrder) {
  const int P = 16;
  std::vector<int> order(P);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(7));
  for (Schedule s : {ring_allreduce(P, 100, order), ring_reduce_scatter(P, 5, order),
                     ring_allgather(P, 5, order)}) {
    expect_verified(s, name(s));
    // Position i sends to position i+1.
    for (int i = 0; i < P; ++i)
      for (const Op& op : s.programs[size_t(order[size_t(i)])].step(1))
        if (op.kind == OpKind::Send) {
          EXPECT_EQ(op.peer, order[size_t((i + 1) % P)]);
        }
  }
}

TEST(Ring, RejectsBadOrders) {
  EXPECT_THROW(ring_allreduce(4, 10, std::vector<int>{0, 1, 2}), std::invalid_argument);
  EXPECT_THROW(ring_allreduce(4, 10, std::vector<int>{0, 1, 1, 3}), std::invalid_argument);
  EXPECT_THROW(ring_allreduce(4, 10, std::vector<int>{0, 1, 2, 4}), std::invalid_argument);
  EXPECT_THROW(ring_allreduce(0, 10), std::invalid_argument);
  EXPECT_THROW(ring_allreduce(2, -1), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::sched
