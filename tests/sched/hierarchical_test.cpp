#include "sched/hierarchical.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "tests/sched/verify_sweep.h"

namespace topocoll::sched {
namespace {

using testing::expect_verified;
using testing::name;

TEST(Hierarchical, GroupSizesAndInterGroupAlgorithms) {
  for (int G : {1, 2, 3, 4, 8}) {
    for (int M : {1, 2, 3, 5, 8}) {
      const int P = G * M;
      for (InterGroupAlgo a : {InterGroupAlgo::Ring, InterGroupAlgo::HalvingDoubling}) {
        for (int64_t c : {int64_t(0), int64_t(1), int64_t(P) - 1, int64_t(P) + 1, 7 * int64_t(P) + 3}) {
          HierParams h;
          h.group_size = G;
          h.inter = a;
          const Schedule s = hierarchical_allreduce(P, c, h);
          const VerifyResult r = expect_verified(s, name(s) + " G=" + std::to_string(G));
          EXPECT_TRUE(r.bitwise_identical) << name(s) << " G=" << G;
        }
      }
    }
  }
}

TEST(Hierarchical, NapPackagesOnATorus) {
  // 4 or 8 nodes per package, packages on a 2-D torus: local, vertical, horizontal.
  for (int G : {4, 8}) {
    for (std::vector<int> dims : {std::vector<int>{2, 2}, std::vector<int>{3, 2}, std::vector<int>{4, 4},
                                  std::vector<int>{1, 3}}) {
      HierParams h;
      h.group_size = G;
      h.torus_dims = dims;
      const int P = G * dims[0] * dims[1];
      const Schedule s = hierarchical_allreduce(P, 1000 + P, h);
      const VerifyResult r = expect_verified(s, name(s));
      EXPECT_TRUE(r.bitwise_identical);
      int ring_steps = 0;
      for (int d : dims) ring_steps += d > 1 ? 2 * (d - 1) : 0;
      EXPECT_EQ(s.num_steps(), 2 + ring_steps);
    }
  }
}

TEST(Hierarchical, ReduceScatterFirstOnTheTorusMovesLess) {
  for (int G : {1, 4, 8}) {
    for (std::vector<int> dims : {std::vector<int>{2, 2}, std::vector<int>{3, 2}, std::vector<int>{4, 4},
                                  std::vector<int>{3, 1, 5}}) {
      HierParams h;
      h.group_size = G;
      h.torus_dims = dims;
      int groups = 1;
      for (int d : dims) groups *= d;
      const int P = G * groups;
      for (int64_t c : {int64_t(0), int64_t(1), int64_t(P) + 1, 64 * int64_t(P) + 3}) {
        h.reduce_scatter_first = false;
        const Schedule per_dim = hierarchical_allreduce(P, c, h);
        h.reduce_scatter_first = true;
        const Schedule rs_first = hierarchical_allreduce(P, c, h);
        const VerifyResult a = expect_verified(per_dim, name(per_dim));
        const VerifyResult b = expect_verified(rs_first, name(rs_first) + " rs-first");
        EXPECT_TRUE(b.bitwise_identical);
        EXPECT_EQ(rs_first.num_steps(), per_dim.num_steps());
        if (c > 1000) {
          EXPECT_LT(b.stats.max_send_elems_per_rank, a.stats.max_send_elems_per_rank) << name(rs_first);
        }
      }
    }
  }
  HierParams h;
  h.group_size = 2;
  h.inter = InterGroupAlgo::HalvingDoubling;
  h.reduce_scatter_first = true;
  EXPECT_THROW(hierarchical_allreduce(8, 10, h), std::invalid_argument);
}

TEST(Hierarchical, MultiGpuHostsWithHdAcrossHostsAtScale) {
  for (int hosts : {16, 64, 512}) {
    HierParams h;
    h.group_size = 8;
    h.inter = InterGroupAlgo::HalvingDoubling;
    const Schedule s = hierarchical_allreduce(8 * hosts, 8 * hosts * 4 + 5, h);
    expect_verified(s, name(s));
  }
}

TEST(Hierarchical, FollowsTheOrder) {
  const int P = 24;
  std::vector<int> order(static_cast<size_t>(P));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(11));
  HierParams h;
  h.group_size = 4;
  h.torus_dims = {3, 2};
  const Schedule s = hierarchical_allreduce(P, 500, h, order);
  expect_verified(s, name(s));
  // The first step stays inside each group of 4 consecutive positions.
  for (int p = 0; p < P; ++p)
    for (const Op& op : s.programs[size_t(order[size_t(p)])].step(0))
      if (op.kind == OpKind::Send) {
        int q = 0;
        while (order[size_t(q)] != op.peer) ++q;
        EXPECT_EQ(q / 4, p / 4);
      }
}

TEST(Hierarchical, RejectsBadParameters) {
  HierParams h;
  h.group_size = 3;
  EXPECT_THROW(hierarchical_allreduce(8, 10, h), std::invalid_argument);
  h.group_size = 2;
  h.torus_dims = {3, 2};
  EXPECT_THROW(hierarchical_allreduce(8, 10, h), std::invalid_argument);
  h.torus_dims = {0, 4};
  EXPECT_THROW(hierarchical_allreduce(8, 10, h), std::invalid_argument);
}

}  // namespace
}  // namespace topocoll::sched
