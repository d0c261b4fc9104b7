#include "sched/all_to_all.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "sched/verifier.h"
#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;

TEST(AllToAll, VerifiesForRankCountsTo257) {
  std::vector<int> counts;  // O(N^2) transfers: every N to 64, then a spread to 257
  for (int N = 1; N <= 64; ++N) counts.push_back(N);
  for (int N : {100, 127, 128, 129, 200, 255, 256, 257}) counts.push_back(N);
  for (int N : counts)
    for (int64_t c : {0, 1, 3}) {
      const Schedule s = direct_all_to_all(N, c);
      expect_verified(s, name(s));
      const Schedule t = ring_all_to_all(N, c);
      expect_verified(t, name(t));
    }
  for (int N : {64, 256, 512}) expect_verified(direct_all_to_all(N, 2), "direct all-to-all P=" + std::to_string(N));
}

TEST(AllToAll, StepIPairsDistanceI) {
  const int N = 8;
  const Schedule s = direct_all_to_all(N, 4);
  ASSERT_EQ(s.num_steps(), N - 1);
  for (int i = 1; i < N; ++i)
    for (int r = 0; r < N; ++r)
      for (const Op& op : s.programs[size_t(r)].step(i - 1)) {
        if (op.kind == OpKind::Send) {
          EXPECT_EQ(op.peer, (r + i) % N);
        }
        if (op.kind == OpKind::Recv) {
          EXPECT_EQ(op.peer, (r - i + N) % N);
        }
      }
}

TEST(AllToAll, RingForwardsBetweenNeighboursOnly) {
  const int N = 8;
  const Schedule s = ring_all_to_all(N, 4);
  ASSERT_EQ(s.num_steps(), N - 1);
  for (int r = 0; r < N; ++r)
    for (const Op& op : s.programs[size_t(r)].ops) {
      if (op.kind == OpKind::Send) {
        EXPECT_EQ(op.peer, (r + 1) % N);
      }
      if (op.kind == OpKind::Recv) {
        EXPECT_EQ(op.peer, (r + N - 1) % N);
      }
    }
  const VerifyResult v = verify(s);
  ASSERT_TRUE(v.ok) << v.error;
  EXPECT_EQ(v.stats.total_send_elems, int64_t(N) * N * (N - 1) / 2 * 4);  // N(N-1)/2 blocks per link
}

TEST(AllToAll, FollowsTheOrderAndRefusesInPlace) {
  const int N = 10;
  std::vector<int> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  const Schedule s = direct_all_to_all(N, 6, order);
  expect_verified(s, name(s));
  const Schedule t = ring_all_to_all(N, 6, order);
  expect_verified(t, name(t));
  VerifyOptions o;
  o.aliasing = Aliasing::InPlace;
  EXPECT_FALSE(verify(s, o).ok);
}

TEST(AllToAll, VerifierCatchesASwappedBlock) {
  Schedule s = direct_all_to_all(4, 5);
  for (Op& op : s.programs[0].ops)
    if (op.kind == OpKind::Send && op.peer == 1) op.srcs[0].offset = 15;  // rank 3's block
  const VerifyResult r = verify(s);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("rank 1 output[0,5) should hold rank 0's input[5,...)"), std::string::npos) << r.error;
}

}  // namespace
}  // namespace topocoll::sched
