#include "sched/nccl_tests_sizes.h"

#include <gtest/gtest.h>

namespace topocoll::sched {
namespace {

TEST(NcclTestsSizes, SizeOfCount) {
  EXPECT_EQ(size_of_count(Collective::AllReduce, 10, 4, 8), 40);
  EXPECT_EQ(size_of_count(Collective::ReduceScatter, 10, 4, 8), 320);
  EXPECT_EQ(size_of_count(Collective::AllGather, 10, 2, 8), 160);
  EXPECT_EQ(size_of_count(Collective::AllToAll, 10, 1, 8), 80);
}

TEST(NcclTestsSizes, CountOfSize) {
  EXPECT_EQ(count_of_size(Collective::AllReduce, 40, 4, 8), 10);
  EXPECT_EQ(count_of_size(Collective::ReduceScatter, 320, 4, 8), 10);
  EXPECT_EQ(count_of_size(Collective::AllGather, 160, 2, 8), 10);
  EXPECT_EQ(count_of_size(Collective::AllToAll, 80, 1, 8), 10);
  // Uneven: rounded down to whole elements, then to whole per-rank counts.
  EXPECT_EQ(count_of_size(Collective::AllReduce, 43, 4, 8), 10);
  EXPECT_EQ(count_of_size(Collective::AllGather, 100, 4, 8), 3);
  EXPECT_EQ(count_of_size(Collective::AllGather, 100, 4, 0), 25);  // no ranks: one
}

TEST(NcclTestsSizes, CountAndSizeRoundTrip) {
  for (Collective c : {Collective::AllReduce, Collective::ReduceScatter, Collective::AllGather,
                       Collective::AllToAll})
    for (int n : {1, 3, 8, 257})
      for (int64_t count : {0, 1, 7, 1000})
        EXPECT_EQ(count_of_size(c, size_of_count(c, count, 2, n), 2, n), count);
}

TEST(NcclTestsSizes, BusBandwidthFactors) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Collective::AllReduce, 1), 0.0);
  // 1 GB in 1000 us = 1000 GB/s algorithm bandwidth.
  EXPECT_DOUBLE_EQ(algbw_gbs(1e9, 1000), 1000.0);
  EXPECT_DOUBLE_EQ(busbw_gbs(Collective::AllReduce, 8, 1e9, 1000), 1750.0);
  EXPECT_DOUBLE_EQ(algbw_gbs(1e9, 0), 0.0);
}

}  // namespace
}  // namespace topocoll::sched
