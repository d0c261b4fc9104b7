#include "sched/halving_doubling.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <set>
#include <utility>

#include "sched/link_load.h"

#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;
using testing::sweep_counts;

TEST(HalvingDoubling, AllCollectivesVerifyForEveryRankCountTo257) {
  for (int P = 1; P <= 257; ++P) {
    for (int64_t c : sweep_counts(P)) {
      const Schedule ar = hd_allreduce(P, c);
      EXPECT_TRUE(expect_verified(ar, name(ar)).bitwise_identical) << name(ar);
      // The standalone halves move count*P elements per rank; two counts keep it quick.
      if (c > 1 && c != int64_t(P) + 1) continue;
      for (const Schedule& s : {hd_reduce_scatter(P, c), hd_allgather(P, c)}) expect_verified(s, name(s));
    }
  }
}

TEST(HalvingDoubling, PowersOfTwoTo4096) {
  for (int P = 2; P <= 4096; P *= 2) {
    for (int64_t c : {int64_t(P) - 1, 7 * int64_t(P) + 3}) {
      const Schedule s = hd_allreduce(P, c);
      EXPECT_TRUE(expect_verified(s, name(s)).bitwise_identical) << name(s);
    }
    for (const Schedule& s : {hd_reduce_scatter(P, 3), hd_allgather(P, 3)}) expect_verified(s, name(s));
  }
}

TEST(HalvingDoubling, VerifiesAtScaleWithLogarithmicState) {
  // 16384 ranks: the verifier's state per rank buffer stays O(log P) pieces (finished
  // ranges merge), so memory is linear in ranks x steps.
  const int P = 16384;
  const Schedule s = hd_allreduce(P, 4 * int64_t(P) + 3);
  const VerifyResult r = verify(s);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.bitwise_identical);
  EXPECT_EQ(r.stats.steps, 28);
  EXPECT_LE(r.stats.max_pieces, 2 * 14 + 2);
  // One shared tree: both ranks of a pair reduce lower's operand first, so every element's
  // tree is the same P-1 ordered sums and one finalize, whichever rank computed them.
  EXPECT_EQ(r.stats.expressions, int64_t(P));
}

TEST(HalvingDoubling, StepStructure) {
  // Power of two: log2 P halving + log2 P doubling steps, each a pairwise exchange of all
  // ranks with partner v XOR 2^s, distance 1 first in halving.
  const int P = 16;
  const Schedule s = hd_allreduce(P, 1600);
  ASSERT_EQ(s.num_steps(), 8);
  const int dist[8] = {1, 2, 4, 8, 8, 4, 2, 1};
  for (int st = 0; st < 8; ++st)
    for (int v = 0; v < P; ++v) {
      int sends = 0;
      for (const Op& op : s.programs[size_t(v)].step(st)) {
        if (op.kind == OpKind::Send || op.kind == OpKind::Recv) {
          EXPECT_EQ(op.peer, v ^ dist[st]);
        }
        sends += op.kind == OpKind::Send;
      }
      EXPECT_EQ(sends, 1);
    }
  // Rabenseifner's volume: 2(P-1)/P of the vector per rank.
  VerifyResult r = verify(s);
  EXPECT_EQ(r.stats.max_send_elems_per_rank, 2 * 15 * 100);
  // Non-power-of-two: one pre and one post step around the core.
  EXPECT_EQ(hd_allreduce(12, 100).num_steps(), 2 + 2 * 3);
  EXPECT_EQ(hd_reduce_scatter(16, 10).num_steps(), 4);
  EXPECT_EQ(hd_allgather(16, 10).num_steps(), 4);
}

TEST(HalvingDoubling, FollowsTheOrderIncludingFoldedRanks) {
  for (int P : {16, 24}) {
    std::vector<int> order(static_cast<size_t>(P));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(P));
    const Schedule s = hd_allreduce(P, 1000, order);
    expect_verified(s, name(s));
    const int q = 16, pre = P > q ? 1 : 0;
    for (int v = 0; v < q; ++v)  // first halving step: virtual partner v ^ 1
      for (const Op& op : s.programs[size_t(order[size_t(v)])].step(pre))
        if (op.kind == OpKind::Send) {
          EXPECT_EQ(op.peer, order[size_t(v ^ 1)]);
        }
    for (int e = 0; e + q < P; ++e)  // the folded rank q+e talks to core rank e only
      for (const Op& op : s.programs[size_t(order[size_t(q + e)])].ops) EXPECT_EQ(op.peer, order[size_t(e)]);
    for (const Schedule& t : {hd_reduce_scatter(P, 5, order), hd_allgather(P, 5, order)}) expect_verified(t, name(t));
  }
}

// The reduce-scatter and allgather alone run distance q/2 first; under the bit-reversed
// order their step s pairs the ranks the allreduce's halving step s pairs (sched/hd_order.h
// relies on it to keep the heavy steps where an allreduce order put them).
TEST(HalvingDoubling, BitReversedOrderGivesTheHalvesTheAllreducePairs) {
  std::mt19937 rng(7);
  for (int n : {2, 4, 8, 32, 256}) {
    std::vector<int> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    const std::vector<int> reversed = bit_reversed_order(order);
    EXPECT_EQ(bit_reversed_order(reversed), order) << n;  // an involution
    const Schedule ar = hd_allreduce(n, 1024, order);
    const int k = std::countr_zero(unsigned(n));
    for (const Schedule& half : {hd_reduce_scatter(n, 1024, reversed), hd_allgather(n, 1024, reversed)}) {
      ASSERT_EQ(half.num_steps(), k) << int(half.collective) << " " << n;
      std::vector<Flow> flows;
      for (int s = 0; s < k; ++s) {
        std::set<std::pair<int, int>> want, got;
        step_flows(ar, s, 4, flows);
        for (const Flow& f : flows) want.insert({f.src, f.dst});
        // Allgather's step s is the halving's step k-1-s run backwards: same pairs.
        step_flows(half, half.collective == Collective::AllGather ? k - 1 - s : s, 4, flows);
        for (const Flow& f : flows) got.insert({f.src, f.dst});
        EXPECT_EQ(got, want) << int(half.collective) << " n=" << n << " step " << s;
      }
    }
  }
}

}  // namespace
}  // namespace topocoll::sched
