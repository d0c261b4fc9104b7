#include "sched/fc_direct.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;
using testing::sweep_counts;

TEST(FcDirect, VerifiesForRankCountsTo257) {
  // O(N^2) transfers: every N to 40, then a spread to 257.
  std::vector<int> counts;
  for (int N = 1; N <= 40; ++N) counts.push_back(N);
  for (int N : {57, 64, 100, 127, 128, 129, 200, 255, 256, 257}) counts.push_back(N);
  for (int N : counts) {
    for (int64_t c : sweep_counts(N)) {
      for (const Schedule& s : {fc_direct_allreduce(N, c), fc_direct_reduce_scatter(N, c > 3 ? 3 : c),
                                fc_direct_allgather(N, c > 3 ? 3 : c)}) {
        const VerifyResult r = expect_verified(s, name(s));
        EXPECT_TRUE(r.bitwise_identical) << name(s);
      }
    }
  }
}

TEST(FcDirect, PowersOfTwoTo512) {
  for (int N = 2; N <= 512; N *= 2)
    for (const Schedule& s : {fc_direct_allreduce(N, 2 * int64_t(N) + 1), fc_direct_allgather(N, 1)})
      expect_verified(s, name(s));
}

TEST(FcDirect, OneStepPerPhaseAndChainedReduces) {
  const int N = 16;
  const Schedule s = fc_direct_allreduce(N, 1600);
  ASSERT_EQ(s.num_steps(), 2);
  for (int r = 0; r < N; ++r) {
    int sends = 0, recvs = 0, reduces = 0, inputs = 0;
    for (const Op& op : s.programs[size_t(r)].step(0)) {
      sends += op.kind == OpKind::Send;
      recvs += op.kind == OpKind::Recv;
      if (op.kind == OpKind::Reduce) {
        ++reduces;
        EXPECT_LE(op.nsrc, kMaxReduceInputs);
        inputs += op.nsrc;
      }
    }
    EXPECT_EQ(sends, N - 1);
    EXPECT_EQ(recvs, N - 1);
    // Own value + 15 peers: 8 sources, then the partial sum + 7, then + the last one.
    EXPECT_EQ(reduces, 3);
    EXPECT_EQ(inputs, 8 + 8 + 2);
  }
  const VerifyResult r = verify(s);
  EXPECT_EQ(r.stats.max_send_elems_per_rank, 2 * 15 * 100);  // bandwidth-optimal
  EXPECT_EQ(r.stats.max_transfers_per_rank_step, 2 * (N - 1));
}

TEST(FcDirect, FollowsTheOrder) {
  const int N = 12;
  std::vector<int> order(static_cast<size_t>(N));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(3));
  for (const Schedule& s : {fc_direct_allreduce(N, 100, order), fc_direct_reduce_scatter(N, 7, order),
                            fc_direct_allgather(N, 7, order)})
    expect_verified(s, name(s));
}

}  // namespace
}  // namespace topocoll::sched
