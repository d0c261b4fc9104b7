#include "sched/nap_log_step.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;
using testing::sweep_counts;

TEST(NapLogStep, VerifiesForEveryRankCountTo257) {
  for (int N = 1; N <= 257; ++N) {
    for (int64_t c : sweep_counts(N)) {
      if (c > 1 && c != int64_t(N) + 1 && N > 64) continue;  // whole vectors: keep it quick
      const Schedule ar = log_step_allreduce(N, c);
      const VerifyResult r = expect_verified(ar, name(ar));
      EXPECT_EQ(r.bitwise_identical, ar.claims_bitwise_identical || c == 0) << name(ar);
      const Schedule ag = log_step_allgather(N, c);
      expect_verified(ag, name(ag));
    }
  }
}

TEST(NapLogStep, PowersOfTwoTo4096) {
  for (int N = 2; N <= 4096; N *= 2) {
    for (const Schedule& s : {log_step_allreduce(N, 5), log_step_allgather(N, 3)}) expect_verified(s, name(s));
  }
}

// The paper's step S sends to (i + d) mod N with d = 2^(S-1); its "2(S-1)" agrees only for
// S <= 3 (N <= 8).
void expect_distances(int N) {
  const Schedule s = log_step_allreduce(N, 64);
  int k = 0;
  while ((1 << k) < N) ++k;
  ASSERT_EQ(s.num_steps(), k);
  for (int S = 1; S <= k; ++S) {
    const int d = 1 << (S - 1);
    for (int i = 0; i < N; ++i) {
      int sends = 0, recvs = 0;
      for (const Op& op : s.programs[size_t(i)].step(S - 1)) {
        if (op.kind == OpKind::Send) {
          ++sends;
          EXPECT_EQ(op.peer, (i + d) % N) << "N=" << N << " S=" << S;
          EXPECT_EQ(op.count, 64);  // the whole vector
        }
        if (op.kind == OpKind::Recv) {
          ++recvs;
          EXPECT_EQ(op.peer, (i - d + N) % N) << "N=" << N << " S=" << S;
        }
      }
      EXPECT_EQ(sends, 1);
      EXPECT_EQ(recvs, 1);
    }
  }
  const VerifyResult r = verify(s);
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_FALSE(r.bitwise_identical);
  EXPECT_EQ(r.stats.max_send_elems_per_rank, 64 * k);  // log2 N whole vectors
}

TEST(NapLogStep, DistanceIsTwoToTheSMinusOneForSixteenAndThirtyTwo) {
  expect_distances(16);
  expect_distances(32);
  // Where the paper's 2(S-1) would differ (S = 4 at N = 16: 6 instead of 8), a rank would
  // receive some contributions twice; 2^(S-1) gives every rank all N exactly once, which
  // the verifier proved above.
}

TEST(NapLogStep, AllgatherStepsAndVolume) {
  for (int N : {4, 8, 16, 6, 13}) {
    const Schedule s = log_step_allgather(N, 10);
    int k = 0;
    while ((1 << k) < N) ++k;
    EXPECT_EQ(s.num_steps(), k);
    const VerifyResult r = expect_verified(s, name(s));
    EXPECT_EQ(r.stats.max_send_elems_per_rank, 10 * (N - 1));
  }
}

TEST(NapLogStep, FollowsTheOrder) {
  for (int N : {8, 11}) {
    std::vector<int> order(static_cast<size_t>(N));
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), std::mt19937(N));
    for (const Schedule& s : {log_step_allreduce(N, 40, order), log_step_allgather(N, 4, order)})
      expect_verified(s, name(s));
    // Position i sends to position i+1 in the first step (N = 8: no fold step).
    if (N == 8) {
      const Schedule s = log_step_allreduce(N, 40, order);
      for (int i = 0; i < N; ++i)
        for (const Op& op : s.programs[size_t(order[size_t(i)])].step(0))
          if (op.kind == OpKind::Send) {
            EXPECT_EQ(op.peer, order[size_t((i + 1) % N)]);
          }
    }
  }
}

}  // namespace
}  // namespace topocoll::sched
